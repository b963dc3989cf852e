"""stagein: attach to a node agent's memory from Python (ctypes over libstagein).

    import stagein
    with stagein.attach("/run/stagein/job-42.agent/agent.sock") as objs:
        arr = objs["bucket/key"]   # numpy uint8 array, read-only, no copy (host memory;
                                   # a read-only memoryview where numpy is missing)
                                   # or an object with __cuda_array_interface__ (GPU memory)

No compiled extension: libstagein.so.0 is loaded with ctypes ($STAGEIN_LIBRARY
overrides its path)."""
import ctypes
import ctypes.util
import os

_lib = None


def _library():
    global _lib
    if _lib is None:
        path = os.environ.get("STAGEIN_LIBRARY") or ctypes.util.find_library("stagein") \
            or "libstagein.so.0"
        lib = ctypes.CDLL(path)
        lib.stagein_strerror.restype = ctypes.c_char_p
        lib.stagein_strerror.argtypes = [ctypes.c_int]
        lib.stagein_attach.restype = ctypes.c_int
        lib.stagein_attach.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.c_char_p, ctypes.c_size_t]
        lib.stagein_attachment_count.restype = ctypes.c_size_t
        lib.stagein_attachment_count.argtypes = [ctypes.c_void_p]
        lib.stagein_attachment_get.restype = ctypes.POINTER(_Attached)
        lib.stagein_attachment_get.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.stagein_detach.restype = None
        lib.stagein_detach.argtypes = [ctypes.c_void_p]
        lib.stagein_agent_stop.restype = ctypes.c_int
        lib.stagein_agent_stop.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        _lib = lib
    return _lib


class _Attached(ctypes.Structure):
    # stagein_attached_t in stagein/stagein.h
    _fields_ = [("path", ctypes.c_char_p), ("data", ctypes.c_void_p),
                ("size", ctypes.c_uint64), ("checksum", ctypes.c_char_p),
                ("gpu", ctypes.c_int)]


class StageinError(Exception):
    def __init__(self, code, text):
        super().__init__(text)
        self.code = code


class GpuObject:
    """GPU memory of the agent, for CuPy/PyTorch (zero copy, read-only by convention)."""

    def __init__(self, attachment, path, ptr, size, checksum, gpu):
        self._attachment = attachment   # keeps the mapping alive
        self.path, self.ptr, self.size, self.checksum, self.gpu = path, ptr, size, checksum, gpu

    @property
    def __cuda_array_interface__(self):
        return {"shape": (self.size,), "typestr": "|u1", "data": (self.ptr, True),
                "version": 3, "strides": None}


class Attachment:
    """The objects an agent holds, mapped into this process until detach()."""

    def __init__(self, socket_path):
        lib = _library()
        handle = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        rc = lib.stagein_attach(os.fsencode(socket_path), ctypes.byref(handle), err, len(err))
        if rc != 0:
            raise StageinError(rc, err.value.decode(errors="replace")
                               or lib.stagein_strerror(rc).decode())
        self._handle = handle
        self.objects = {}
        for i in range(lib.stagein_attachment_count(handle)):
            o = lib.stagein_attachment_get(handle, i).contents
            path = o.path.decode()
            self.objects[path] = self._wrap(path, o)

    def _wrap(self, path, o):
        checksum = o.checksum.decode()
        if o.gpu >= 0:
            return GpuObject(self, path, o.data or 0, o.size, checksum, o.gpu)
        buf = (ctypes.c_uint8 * o.size).from_address(o.data) if o.size else bytearray()
        try:
            import numpy
        except ImportError:
            # without numpy: a read-only memoryview, still without a copy
            return memoryview(buf).cast("B").toreadonly()
        arr = numpy.frombuffer(buf, dtype=numpy.uint8) if o.size else numpy.zeros(0, numpy.uint8)
        arr.flags.writeable = False
        return arr

    def __getitem__(self, path):
        return self.objects[path]

    def __iter__(self):
        return iter(self.objects)

    def __len__(self):
        return len(self.objects)

    def checksum(self, path):
        o = self.objects[path]
        if isinstance(o, GpuObject):
            return o.checksum
        lib = _library()
        for i in range(lib.stagein_attachment_count(self._handle)):
            a = lib.stagein_attachment_get(self._handle, i).contents
            if a.path.decode() == path:
                return a.checksum.decode()
        raise KeyError(path)

    def detach(self):
        """Unmaps everything: arrays from this attachment must not be used after."""
        if self._handle:
            self.objects = {}
            _library().stagein_detach(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()


def attach(socket_path):
    return Attachment(socket_path)


def stop_agent(socket_path):
    lib = _library()
    err = ctypes.create_string_buffer(512)
    rc = lib.stagein_agent_stop(os.fsencode(socket_path), err, len(err))
    if rc != 0:
        raise StageinError(rc, err.value.decode(errors="replace"))
