package walvfs

import (
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// A C function pointer in modernc.org/sqlite's structures holds a Go func
// value: setFunc stores one, fn reads one back to call it. The field is a
// uintptr, which the garbage collector does not follow: a closure stored
// there is kept alive in funcs.
func setFunc[F any](field *uintptr, f F) {
	funcs = append(funcs, f)
	*(*F)(unsafe.Pointer(field)) = f
}

var funcs []any

func fn[F any](p uintptr) F { return *(*F)(unsafe.Pointer(&p)) }

type (
	openFunc  = func(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32
	closeFunc = func(tls *libc.TLS, pFile uintptr) int32
	rwFunc    = func(tls *libc.TLS, pFile, zBuf uintptr, amt int32, off int64) int32
	sizeFunc  = func(tls *libc.TLS, pFile uintptr, size int64) int32
	intFunc   = func(tls *libc.TLS, pFile uintptr, arg int32) int32
	outFunc   = func(tls *libc.TLS, pFile, pOut uintptr) int32
	ctrlFunc  = func(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32
)

func callOpen(p uintptr) openFunc   { return fn[openFunc](p) }
func callWrite(p uintptr) rwFunc    { return fn[rwFunc](p) }
func callClose(p uintptr) closeFunc { return fn[closeFunc](p) }

// setMethods fills a WAL file's methods (version 1: SQLite maps and locks
// shared memory through the database file, never through its log). Each
// writes what waits in the buffer before it goes to the default VFS's.
func setMethods() {
	methods.FiVersion = 1
	setFunc(&methods.FxClose, closeFunc(xClose))
	setFunc(&methods.FxRead, rwFunc(func(tls *libc.TLS, pFile, zBuf uintptr, amt int32, off int64) int32 {
		f, rc := flushed(tls, pFile)
		if rc != sqlite3.SQLITE_OK {
			return rc
		}
		return fn[rwFunc](f.m.FxRead)(tls, f.inner, zBuf, amt, off)
	}))
	setFunc(&methods.FxWrite, rwFunc(func(tls *libc.TLS, pFile, zBuf uintptr, amt int32, off int64) int32 {
		return lookup(pFile).write(tls, zBuf, amt, off)
	}))
	setFunc(&methods.FxTruncate, sizeFunc(func(tls *libc.TLS, pFile uintptr, size int64) int32 {
		f, rc := flushed(tls, pFile)
		if rc != sqlite3.SQLITE_OK {
			return rc
		}
		if rc = fn[sizeFunc](f.m.FxTruncate)(tls, f.inner, size); rc == sqlite3.SQLITE_OK {
			f.end = min(f.end, size)
		}
		return rc
	}))
	for _, m := range []struct {
		field *uintptr
		inner func(*sqlite3.Tsqlite3_io_methods) uintptr
	}{
		{&methods.FxSync, func(m *sqlite3.Tsqlite3_io_methods) uintptr { return m.FxSync }},
		{&methods.FxLock, func(m *sqlite3.Tsqlite3_io_methods) uintptr { return m.FxLock }},
		{&methods.FxUnlock, func(m *sqlite3.Tsqlite3_io_methods) uintptr { return m.FxUnlock }},
	} {
		inner := m.inner
		setFunc(m.field, intFunc(func(tls *libc.TLS, pFile uintptr, arg int32) int32 {
			f, rc := flushed(tls, pFile)
			if rc != sqlite3.SQLITE_OK {
				return rc
			}
			return fn[intFunc](inner(f.m))(tls, f.inner, arg)
		}))
	}
	for _, m := range []struct {
		field *uintptr
		inner func(*sqlite3.Tsqlite3_io_methods) uintptr
	}{
		{&methods.FxFileSize, func(m *sqlite3.Tsqlite3_io_methods) uintptr { return m.FxFileSize }},
		{&methods.FxCheckReservedLock, func(m *sqlite3.Tsqlite3_io_methods) uintptr { return m.FxCheckReservedLock }},
	} {
		inner := m.inner
		setFunc(m.field, outFunc(func(tls *libc.TLS, pFile, pOut uintptr) int32 {
			f, rc := flushed(tls, pFile)
			if rc != sqlite3.SQLITE_OK {
				return rc
			}
			return fn[outFunc](inner(f.m))(tls, f.inner, pOut)
		}))
	}
	setFunc(&methods.FxFileControl, ctrlFunc(func(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
		f, rc := flushed(tls, pFile)
		if rc != sqlite3.SQLITE_OK {
			return rc
		}
		return fn[ctrlFunc](f.m.FxFileControl)(tls, f.inner, op, pArg)
	}))
	setFunc(&methods.FxSectorSize, closeFunc(func(tls *libc.TLS, pFile uintptr) int32 {
		f := lookup(pFile)
		return fn[closeFunc](f.m.FxSectorSize)(tls, f.inner)
	}))
	setFunc(&methods.FxDeviceCharacteristics, closeFunc(func(tls *libc.TLS, pFile uintptr) int32 {
		f := lookup(pFile)
		return fn[closeFunc](f.m.FxDeviceCharacteristics)(tls, f.inner)
	}))
}

// flushed is the file at pFile with its buffer written.
func flushed(tls *libc.TLS, pFile uintptr) (*walFile, int32) {
	f := lookup(pFile)
	return f, f.flush(tls)
}

func xClose(tls *libc.TLS, pFile uintptr) int32 {
	f, rc := flushed(tls, pFile)
	if crc := callClose(f.m.FxClose)(tls, f.inner); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	mu.Lock()
	delete(files, pFile)
	mu.Unlock()
	f.pin.Unpin()
	return rc
}
