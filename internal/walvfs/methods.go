package walvfs

import (
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// A C function pointer in modernc.org/sqlite's structures holds a Go func
// value: setFunc stores one, fn reads one back to call it. The field is a
// uintptr, which the garbage collector does not follow: whatever is stored
// there is also kept in funcs.
func setFunc[F any](field *uintptr, f F) {
	funcs = append(funcs, f)
	*(*F)(unsafe.Pointer(field)) = f
}

var funcs []any

func fn[F any](p uintptr) F { return *(*F)(unsafe.Pointer(&p)) }

type (
	openFunc = func(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32
	fileFunc = func(tls *libc.TLS, pFile uintptr) int32
	rwFunc   = func(tls *libc.TLS, pFile, zBuf uintptr, amt int32, off int64) int32
	sizeFunc = func(tls *libc.TLS, pFile uintptr, size int64) int32
	intFunc  = func(tls *libc.TLS, pFile uintptr, arg int32) int32
	outFunc  = func(tls *libc.TLS, pFile, pOut uintptr) int32
	ctrlFunc = func(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32
)

// setMethods fills a WAL file's methods (version 1: SQLite maps and locks
// shared memory through the database file, never through its log). Each
// but xWrite, xSectorSize and xDeviceCharacteristics writes what waits in
// the buffer before it calls the default VFS's.
func setMethods() {
	methods.FiVersion = 1
	setFunc[fileFunc](&methods.FxClose, xClose)
	setFunc[rwFunc](&methods.FxWrite, func(tls *libc.TLS, pFile, zBuf uintptr, amt int32, off int64) int32 {
		return lookup(pFile).write(tls, zBuf, amt, off)
	})
	setFunc[rwFunc](&methods.FxRead, func(tls *libc.TLS, pFile, zBuf uintptr, amt int32, off int64) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 { return fn[rwFunc](f.m.FxRead)(tls, f.inner, zBuf, amt, off) })
	})
	setFunc[sizeFunc](&methods.FxTruncate, func(tls *libc.TLS, pFile uintptr, size int64) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 {
			rc := fn[sizeFunc](f.m.FxTruncate)(tls, f.inner, size)
			if rc == sqlite3.SQLITE_OK {
				f.end = min(f.end, size)
			}
			return rc
		})
	})
	setFunc[intFunc](&methods.FxSync, func(tls *libc.TLS, pFile uintptr, flags int32) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 { return fn[intFunc](f.m.FxSync)(tls, f.inner, flags) })
	})
	setFunc[intFunc](&methods.FxLock, func(tls *libc.TLS, pFile uintptr, lock int32) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 { return fn[intFunc](f.m.FxLock)(tls, f.inner, lock) })
	})
	setFunc[intFunc](&methods.FxUnlock, func(tls *libc.TLS, pFile uintptr, lock int32) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 { return fn[intFunc](f.m.FxUnlock)(tls, f.inner, lock) })
	})
	setFunc[outFunc](&methods.FxFileSize, func(tls *libc.TLS, pFile, pSize uintptr) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 { return fn[outFunc](f.m.FxFileSize)(tls, f.inner, pSize) })
	})
	setFunc[outFunc](&methods.FxCheckReservedLock, func(tls *libc.TLS, pFile, pResOut uintptr) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 { return fn[outFunc](f.m.FxCheckReservedLock)(tls, f.inner, pResOut) })
	})
	setFunc[ctrlFunc](&methods.FxFileControl, func(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
		return flushFirst(tls, pFile, func(f *walFile) int32 { return fn[ctrlFunc](f.m.FxFileControl)(tls, f.inner, op, pArg) })
	})
	setFunc[fileFunc](&methods.FxSectorSize, func(tls *libc.TLS, pFile uintptr) int32 {
		f := lookup(pFile)
		return fn[fileFunc](f.m.FxSectorSize)(tls, f.inner)
	})
	setFunc[fileFunc](&methods.FxDeviceCharacteristics, func(tls *libc.TLS, pFile uintptr) int32 {
		f := lookup(pFile)
		return fn[fileFunc](f.m.FxDeviceCharacteristics)(tls, f.inner)
	})
}

// flushFirst writes the buffer of the file at pFile, then calls call.
func flushFirst(tls *libc.TLS, pFile uintptr, call func(*walFile) int32) int32 {
	f := lookup(pFile)
	if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return call(f)
}

func xClose(tls *libc.TLS, pFile uintptr) int32 {
	f := lookup(pFile)
	rc := f.flush(tls)
	if crc := fn[fileFunc](f.m.FxClose)(tls, f.inner); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	mu.Lock()
	delete(files, pFile)
	mu.Unlock()
	f.pin.Unpin()
	return rc
}
