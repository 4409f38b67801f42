// Package walvfs is a SQLite VFS (for modernc.org/sqlite) that writes a
// WAL commit to the file with one write call instead of two per page.
//
// SQLite appends each page of a commit to the write-ahead log as a 24-byte
// frame header and the page, in two writes; a ledger batch of ten settles
// dirties some ten pages, so twenty pwrite system calls, which on a
// virtual machine cost more than the SQL around them (docs/design.md,
// "The SQLite write path"). This VFS is the default one (unix) with
// the WAL file's writes gathered: frames appended at the end of the log
// are buffered, and the buffer is written as soon as the frame that ends a
// transaction (its header carries the database size: the commit mark) has
// its page. Any other use of the file (a read, a sync, its size, a lock,
// truncation, a write that is not an append) writes the buffer first.
//
// So every frame of a commit is in the file before the write call of its
// last page returns, as with the default VFS, and before SQLite publishes
// the commit in the WAL index: readers, checkpoints and other processes
// see the same file they would without it. A crash can only lose frames
// of a transaction that had not committed, as SQLite already allows.
//
// Only frames written by a connection that cannot spill pages to the log
// before its commit (PRAGMA cache_spill = OFF) may be buffered safely: a
// spilled, uncommitted frame left in the buffer after a rollback could
// otherwise be written after another process reused its place in the log.
// Open a writing connection with both: file:…?vfs=modelgate-wal and
// _pragma=cache_spill(false), after Register.
package walvfs

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// Name is the VFS's name, for the vfs URI parameter of a database file name
// (file:ledger.db?vfs=modelgate-wal).
const Name = "modelgate-wal"

const (
	walHeaderSize   = 32 // the log's own header, at offset 0
	frameHeaderSize = 24 // before each page
	// maxBuffer bounds what one file holds back; a larger commit is
	// written in pieces of at most this size, the most the default VFS
	// writes with one call (its seekAndWriteFd masks the length with
	// 0x1ffff: a longer write would be cut short).
	maxBuffer = 0x1ffff
	// fileHeader is what this VFS keeps before the default VFS's file
	// structure in a WAL file's sqlite3_file: the methods pointer.
	fileHeader = 8
)

var (
	registerOnce sync.Once
	errRegister  error

	base    *sqlite3.Tsqlite3_vfs // the default VFS
	basePtr uintptr
	methods sqlite3.Tsqlite3_io_methods // a WAL file's

	mu    sync.RWMutex
	files = map[uintptr]*walFile{} // by the sqlite3_file's address
)

// Register registers the VFS (once; later calls return the first result).
func Register() error {
	registerOnce.Do(func() { errRegister = register() })
	return errRegister
}

func register() error {
	tls := libc.NewTLS()
	defer tls.Close()
	basePtr = sqlite3.Xsqlite3_vfs_find(tls, 0)
	if basePtr == 0 {
		return fmt.Errorf("walvfs: no default VFS")
	}
	base = (*sqlite3.Tsqlite3_vfs)(ptr(basePtr))
	name, err := libc.CString(Name)
	if err != nil {
		return err
	}
	// the VFS lives in C memory, as SQLite's registry keeps its address
	vfsPtr := cAlloc(tls, int(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
	vfs := (*sqlite3.Tsqlite3_vfs)(ptr(vfsPtr))
	*vfs = *base // every method but xOpen is the default VFS's
	vfs.FzName = name
	vfs.FpNext = 0
	vfs.FszOsFile = base.FszOsFile + fileHeader
	setFunc(&vfs.FxOpen, xOpen)
	setMethods()
	if rc := sqlite3.Xsqlite3_vfs_register(tls, vfsPtr, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("walvfs: register: SQLite error %d", rc)
	}
	return nil
}

// walFile is a WAL file opened through the VFS. SQLite uses a file from
// one connection at a time, so its fields need no lock.
type walFile struct {
	inner   uintptr                      // the default VFS's sqlite3_file, after ours
	m       *sqlite3.Tsqlite3_io_methods // its methods
	buf     []byte                       // pinned: its address is passed to the inner write
	pin     runtime.Pinner
	n       int   // bytes waiting in buf
	off     int64 // the file offset of buf[0]
	end     int64 // the end of the log as this connection wrote it
	commitH bool  // the last write was the header of a frame that ends a transaction
	writes  int64 // write calls made to the file (tests)
	name    string
}

func xOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	if flags&sqlite3.SQLITE_OPEN_WAL == 0 {
		// any other file is the default VFS's own, at the same address
		return fn[openFunc](base.FxOpen)(tls, basePtr, zName, pFile, flags, pOutFlags)
	}
	file := (*sqlite3.Tsqlite3_file)(ptr(pFile))
	file.FpMethods = 0
	inner := pFile + fileHeader
	if rc := fn[openFunc](base.FxOpen)(tls, basePtr, zName, inner, flags, pOutFlags); rc != sqlite3.SQLITE_OK {
		return rc
	}
	f := &walFile{inner: inner, m: (*sqlite3.Tsqlite3_io_methods)(ptr((*sqlite3.Tsqlite3_file)(ptr(inner)).FpMethods)),
		buf: make([]byte, maxBuffer), name: libc.GoString(zName)}
	f.pin.Pin(&f.buf[0])
	mu.Lock()
	files[pFile] = f
	mu.Unlock()
	file.FpMethods = uintptr(unsafe.Pointer(&methods))
	return sqlite3.SQLITE_OK
}

func lookup(pFile uintptr) *walFile {
	mu.RLock()
	f := files[pFile]
	mu.RUnlock()
	return f
}

// write is xWrite: an append to the log is buffered; anything else is
// written through, after the buffer.
func (f *walFile) write(tls *libc.TLS, zBuf uintptr, amt int32, off int64) int32 {
	n := int(amt)
	if n == walHeaderSize && off == 0 {
		f.end = 0 // the log starts again from its beginning
	}
	if off < f.end || (f.n > 0 && off != f.off+int64(f.n)) || n > maxBuffer {
		// a rewrite of what is there (a page written again in place, the
		// checksums redone), or not contiguous: in order, unbuffered
		if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
			return rc
		}
		f.commitH = false
		f.writes++
		rc := fn[rwFunc](f.m.FxWrite)(tls, f.inner, zBuf, amt, off)
		if rc == sqlite3.SQLITE_OK {
			f.end = max(f.end, off+int64(n))
		}
		return rc
	}
	if f.n+n > maxBuffer {
		if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if f.n == 0 {
		f.off = off
	}
	src := unsafe.Slice((*byte)(ptr(zBuf)), n)
	copy(f.buf[f.n:], src)
	f.n += n
	f.end = off + int64(n)
	if n == frameHeaderSize {
		// bytes 4-8 of a frame header: the database's size in pages
		// after a commit, in the frame that ends it; 0 in any other
		f.commitH = binary.BigEndian.Uint32(src[4:8]) != 0
		return sqlite3.SQLITE_OK
	}
	if f.commitH {
		f.commitH = false
		return f.flush(tls)
	}
	return sqlite3.SQLITE_OK
}

// flush writes the buffer, if anything waits in it.
func (f *walFile) flush(tls *libc.TLS) int32 {
	if f.n == 0 {
		return sqlite3.SQLITE_OK
	}
	n := f.n
	f.n = 0
	f.writes++
	return fn[rwFunc](f.m.FxWrite)(tls, f.inner, uintptr(unsafe.Pointer(&f.buf[0])), int32(n), f.off) //nolint:gosec // n is at most len(f.buf)
}

// Writes reports the write calls made to the log of the database file at
// path (as SQLite names it) through the VFS, and whether it is open
// (tests).
func Writes(path string) (writes int64, open bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, f := range files {
		if f.name == path+"-wal" {
			writes += f.writes
			open = true
		}
	}
	return writes, open
}

// ptr turns an address in C memory (never Go's heap) into a pointer.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// cAlloc allocates n zeroed bytes of C memory, never freed (the VFS is
// registered for the life of the process).
func cAlloc(tls *libc.TLS, n int) uintptr {
	p := libc.Xcalloc(tls, 1, libc.Tsize_t(n)) //nolint:gosec // n is a struct size, never negative
	if p == 0 {
		panic("walvfs: out of memory")
	}
	return p
}
