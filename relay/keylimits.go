package relay

import (
	"strings"

	"github.com/modelgate/modelgate/ledger"
)

// A key's own model list (ledger.KeyLimits.Models) narrows what its
// account's plan offers: a model outside it is, to the key, a model that
// does not exist. Every attempt of a request serves the one model it was
// admitted for (its routes differ only in provider and upstream name, at
// the model's one price), so the list and the hold its cap bounds, both
// checked before the first attempt, hold for every failover hop too.

// GlobMatch reports whether s matches pattern, in which * stands for any
// run of characters (slashes included) and every other character for
// itself. It allocates nothing.
func GlobMatch(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[star:], pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			// the last part ends s, after what the others took
			return strings.HasSuffix(s, pattern)
		}
		part := pattern[:star]
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s, pattern = s[i+len(part):], pattern[star+1:]
	}
}

// KeyAllows reports whether limits l (nil: none) let their key call the
// model id: no list, or an entry of it that is id or a pattern matching it.
func KeyAllows(l *ledger.KeyLimits, id string) bool {
	if l == nil || l.Models == nil {
		return true
	}
	for _, pat := range l.Models {
		if GlobMatch(pat, id) {
			return true
		}
	}
	return false
}

// ModelFor finds the model id for principal p: one its plan offers
// (Service.Model) and its key's model list allows. Callers answer a model
// the key may not call as they answer an unknown one (ModelNotFound). A
// key without limits costs one nil check more than Model.
func (s *Service) ModelFor(p Principal, id string) (*Model, bool) {
	m, ok := s.Model(p.Plan, id)
	if ok && p.Limits != nil && !KeyAllows(p.Limits, m.ID) {
		return nil, false
	}
	return m, ok
}
