package gateway

import "testing"

// TestAlertsChanged: the hook set for an app is called with the account,
// and only that app's; without one, or once removed, nothing is called.
func TestAlertsChanged(t *testing.T) {
	a, b := new(App), new(App)
	var got []string
	a.AlertsChanged("acct_none") // no hook: nothing happens
	a.SetAlertsHook(func(id string) { got = append(got, "a:"+id) })
	b.SetAlertsHook(func(id string) { got = append(got, "b:"+id) })
	a.AlertsChanged("acct_1")
	b.AlertsChanged("acct_2")
	a.SetAlertsHook(nil)
	a.AlertsChanged("acct_3")
	b.SetAlertsHook(nil)
	if want := "a:acct_1 b:acct_2"; len(got) != 2 || got[0]+" "+got[1] != want {
		t.Fatalf("calls %q, want %s", got, want)
	}
}
