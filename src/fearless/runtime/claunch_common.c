/* What every compiled launcher shares: see claunch_common.h. */
#include "claunch_common.h"

FL_INTERNAL PyObject *s_tshape, *s_tdtype, *s_get_device, *s_is_contiguous, *s_data_ptr;
static PyObject *s_requires_grad, *s_torch;

FL_INTERNAL int common_intern(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(s_tshape, "shape") INTERN(s_tdtype, "dtype")
    INTERN(s_get_device, "get_device") INTERN(s_is_contiguous, "is_contiguous")
    INTERN(s_data_ptr, "data_ptr") INTERN(s_requires_grad, "requires_grad")
    INTERN(s_torch, "torch")
#undef INTERN
    return 0;
}

/* torch.Tensor, torch._C.is_grad_enabled and the version bump of runtime/arrays.py's
 * bump_versions, taken from torch once it is loaded (it is never unloaded). */
static PyObject *torch_tensor_type, *grad_enabled, *increment_version;

/* 1: torch is loaded and its three are at hand; 0: torch is not loaded; -1: an error. */
static int torch_ready(void) {
    if (increment_version != NULL) return 1;
    PyObject *torch = PyImport_GetModule(s_torch); /* a dict lookup while torch is not loaded */
    if (torch == NULL) return PyErr_Occurred() ? -1 : 0;
    PyObject *c = PyObject_GetAttrString(torch, "_C");
    PyObject *tensor = PyObject_GetAttrString(torch, "Tensor");
    PyObject *enabled = c == NULL ? NULL : PyObject_GetAttrString(c, "is_grad_enabled");
    /* torch.autograd.graph.increment_version's own call, without its wrapper, as arrays.py's
     * bump_versions takes it; the wrapper where a torch has no such function */
    PyObject *bump = c == NULL ? NULL : PyObject_GetAttrString(c, "_increment_version");
    if (bump == NULL && c != NULL) {
        PyErr_Clear();
        PyObject *graph = PyImport_ImportModule("torch.autograd.graph");
        bump = graph == NULL ? NULL : PyObject_GetAttrString(graph, "increment_version");
        Py_XDECREF(graph);
    }
    Py_DECREF(torch);
    Py_XDECREF(c);
    if (tensor == NULL || enabled == NULL || bump == NULL || !PyType_Check(tensor)) {
        Py_XDECREF(tensor); Py_XDECREF(enabled); Py_XDECREF(bump);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "torch.Tensor is not a type");
        return -1;
    }
    torch_tensor_type = tensor, grad_enabled = enabled, increment_version = bump;
    return 1;
}

FL_INTERNAL PyObject *torch_write(PyObject *o, PyObject *tensor_type, Py_ssize_t owner_off) {
    for (int k = 0; k < 16 && (PyObject *)Py_TYPE(o) == tensor_type; k++) {
        o = *(PyObject **)((char *)o + owner_off); /* an fl.Tensor: whose memory it is */
        if (o == NULL) return Py_None;
    }
    if (o == Py_None) return Py_None;
    if ((PyObject *)Py_TYPE(o) == tensor_type) return NULL; /* 16 deep: Python decides */
    int ready = torch_ready();
    if (ready < 0) return NULL;
    if (ready == 0 || !PyObject_TypeCheck(o, (PyTypeObject *)torch_tensor_type)) return Py_None;
    PyObject *v = PyObject_GetAttr(o, s_requires_grad);
    if (v == NULL) return NULL;
    int requires = v == Py_True;
    Py_DECREF(v);
    if (!requires) return o;
    /* it requires grad: in grad mode, torch_write in Python says whether autograd allows it */
    v = PyObject_CallNoArgs(grad_enabled);
    if (v == NULL) return NULL;
    int enabled = v != Py_False;
    Py_DECREF(v);
    return enabled ? NULL : o;
}

FL_INTERNAL void bump_versions(PyObject *const *written, int n) {
    if (n == 0) return;
    PyObject *tensors = PyTuple_New(n);
    for (int k = 0; tensors != NULL && k < n; k++) {
        Py_INCREF(written[k]);
        PyTuple_SET_ITEM(tensors, k, written[k]);
    }
    PyObject *r = tensors == NULL ? NULL : PyObject_CallOneArg(increment_version, tensors);
    Py_XDECREF(tensors);
    Py_XDECREF(r);
    PyErr_Clear(); /* the kernel was launched: a failed bump must not make it launch again */
}

/* The destructor of owning_capsule's capsules: the release function is the capsule's context. */
static void release_capsule(PyObject *capsule) {
    void (*release)(void *) = (void (*)(void *))PyCapsule_GetContext(capsule);
    void *p = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
    if (p != NULL && release != NULL) release(p);
}

FL_INTERNAL PyObject *owning_capsule(void *p, const char *name, void (*release)(void *)) {
    PyObject *capsule = PyCapsule_New(p, name, release_capsule);
    if (capsule == NULL) {
        release(p);
        return NULL;
    }
    PyCapsule_SetContext(capsule, (void *)release); /* cannot fail on a capsule just made */
    return capsule;
}

/* Flat ints of a tuple of `width`-tuples into a new array (NULL and an exception on error). */
FL_INTERNAL int *int_rows(PyObject *rows, int width, int limit) {
    Py_ssize_t n = PyTuple_GET_SIZE(rows);
    int *out = PyMem_Calloc(n * width + 1, sizeof(int));
    if (out == NULL) { PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(rows, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != width) {
            PyErr_SetString(PyExc_ValueError, "a row has the wrong width");
            PyMem_Free(out);
            return NULL;
        }
        for (int k = 0; k < width; k++) {
            Py_ssize_t v;
            if (as_ssize(t, k, &v)) { PyMem_Free(out); return NULL; }
            if (v < 0 || v >= limit) {
                PyErr_SetString(PyExc_ValueError, "an index is out of range");
                PyMem_Free(out);
                return NULL;
            }
            out[i * width + k] = (int)v;
        }
    }
    return out;
}

FL_INTERNAL int as_ssize(PyObject *t, Py_ssize_t i, Py_ssize_t *out) {
    PyObject *v = PyTuple_GetItem(t, i);
    if (v == NULL) return -1;
    *out = PyLong_AsSsize_t(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Copies the Python packer's buffer (`size` bytes at `address`) into `buffer` and points
 * `kernel_params` at `offsets` in it (-1 and an exception when an offset is outside). */
FL_INTERNAL int copy_params(char *buffer, void **kernel_params, unsigned long long address,
                            Py_ssize_t size, PyObject *offsets) {
    memcpy(buffer, (const void *)(uintptr_t)address, size);
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(offsets); k++) {
        Py_ssize_t off;
        if (as_ssize(offsets, k, &off)) return -1;
        if (off < 0 || off >= size) {
            PyErr_SetString(PyExc_ValueError, "an offset is outside the buffer");
            return -1;
        }
        kernel_params[k] = buffer + off;
    }
    return 0;
}

/* The plan of a fast call of `name` (`want` arguments, the plan's capsule first), or NULL and
 * an exception. */
FL_INTERNAL void *plan_arg(PyObject *const *a, Py_ssize_t nargs, Py_ssize_t want,
                           const char *name, const char *capsule) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, want);
        return NULL;
    }
    return PyCapsule_GetPointer(a[0], capsule);
}

/* The offset of `type`'s object slot `name`, or -1 when it is not one. */
FL_INTERNAL Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *d = PyObject_GetAttrString(type, name);
    Py_ssize_t off = -1;
    if (d != NULL && Py_TYPE(d) == &PyMemberDescr_Type) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY)) off = m->offset;
    }
    Py_XDECREF(d);
    PyErr_Clear();
    return off;
}

/* Whether an attribute (or method result when `call`) is exactly `want` (identity). */
FL_INTERNAL int attr_is(PyObject *o, PyObject *name, int call, PyObject *want) {
    PyObject *v = call ? PyObject_CallMethodNoArgs(o, name) : PyObject_GetAttr(o, name);
    if (v == NULL) return 0;
    int ok = (v == want);
    Py_DECREF(v);
    return ok;
}

/* An int attribute (or method result when `call`). */
FL_INTERNAL int attr_long(PyObject *o, PyObject *name, int call, long long *out) {
    PyObject *v = call ? PyObject_CallMethodNoArgs(o, name) : PyObject_GetAttr(o, name);
    if (v == NULL) return 0;
    int ok = PyLong_CheckExact(v);
    if (ok) {
        *out = PyLong_AsLongLong(v);
        ok = !(*out == -1 && PyErr_Occurred());
    }
    Py_DECREF(v);
    return ok;
}

FL_INTERNAL int pack_int(char *slot, int kind, PyObject *v) {
    if (!PyLong_CheckExact(v)) return 0; /* bool, NumPy scalars...: the Python launcher */
    if (kind == K_U64) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return 0;
        memcpy(slot, &u, 8);
        return 1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) return 0;
    switch (kind) {
    case K_I8: { if (x < INT8_MIN || x > INT8_MAX) return 0; int8_t y = (int8_t)x; memcpy(slot, &y, 1); return 1; }
    case K_I16: { if (x < INT16_MIN || x > INT16_MAX) return 0; int16_t y = (int16_t)x; memcpy(slot, &y, 2); return 1; }
    case K_I32: { if (x < INT32_MIN || x > INT32_MAX) return 0; int32_t y = (int32_t)x; memcpy(slot, &y, 4); return 1; }
    case K_I64: { memcpy(slot, &x, 8); return 1; }
    case K_U8: { if (x < 0 || x > UINT8_MAX) return 0; uint8_t y = (uint8_t)x; memcpy(slot, &y, 1); return 1; }
    case K_U16: { if (x < 0 || x > UINT16_MAX) return 0; uint16_t y = (uint16_t)x; memcpy(slot, &y, 2); return 1; }
    case K_U32: { if (x < 0 || x > UINT32_MAX) return 0; uint32_t y = (uint32_t)x; memcpy(slot, &y, 4); return 1; }
    }
    return 0;
}

FL_INTERNAL int pack_float(char *slot, int kind, PyObject *v) {
    double d;
    if (PyFloat_CheckExact(v)) d = PyFloat_AS_DOUBLE(v);
    else if (PyLong_CheckExact(v)) { d = PyLong_AsDouble(v); if (d == -1.0 && PyErr_Occurred()) return 0; }
    else return 0;
    if (kind == K_F64) { memcpy(slot, &d, 8); return 1; }
    float f = (float)d;
    if (isinf(f) && !isinf(d)) return 0; /* struct's 'f' refuses it: the Python launcher says why */
    memcpy(slot, &f, 4);
    return 1;
}

/* The DLPack exchange table of tensor type `tp` (NULL: it has none, or one of another major
 * version), for the last type asked; the type and its capsule are kept alive. */
static PyTypeObject *dl_type;
static const DLExchangeABI *dl_api;

static const DLExchangeABI *dl_api_of(PyTypeObject *tp) {
    if (tp == dl_type) return dl_api;
    const DLExchangeABI *api = NULL;
    PyObject *cap = PyObject_GetAttrString((PyObject *)tp, "__dlpack_c_exchange_api__");
    if (cap != NULL && PyCapsule_IsValid(cap, "dlpack_exchange_api")) {
        const DLExchangeABI *a = PyCapsule_GetPointer(cap, "dlpack_exchange_api");
        if (a != NULL && a->version.major == 1 && a->version.minor >= 2 &&
            a->dltensor_from_py_object_no_sync != NULL)
            api = a;
    }
    PyErr_Clear();
    if (api == NULL) Py_XDECREF(cap); /* else kept: it owns the table */
    Py_INCREF(tp);
    dl_type = tp; /* the previous type's reference is leaked on purpose: its table may live */
    dl_api = api;
    return api;
}

/* Whether DLPack tensor `t` is C-contiguous as torch's is_contiguous() says: extent-1 axes
 * take any stride, and an empty tensor is contiguous. */
static int dl_contiguous(const DLTensorABI *t) {
    for (int k = 0; k < t->ndim; k++)
        if (t->shape[k] == 0) return 1;
    if (t->strides == NULL) return 1;
    int64_t expect = 1;
    for (int k = t->ndim - 1; k >= 0; k--) {
        if (t->shape[k] != 1 && t->strides[k] != expect) return 0;
        expect *= t->shape[k];
    }
    return 1;
}

/* Whether DLPack tensor `t` is on GPU `device` (kDLCUDA), of DLPack dtype `want` (code << 8 |
 * bits, one lane) and C-contiguous (dl_contiguous): DL_OK with *ptr its first element, else
 * DL_REFUSED. */
static int dl_check(const DLTensorABI *t, int want, long device, long long *ptr) {
    if (t->device.device_type != 2 /* kDLCUDA */ || t->device.device_id != device ||
        t->dtype.code != (want >> 8) || t->dtype.bits != (want & 255) || t->dtype.lanes != 1 ||
        t->ndim < 0 || t->ndim > 64 || !dl_contiguous(t))
        return DL_REFUSED;
    *ptr = (long long)((uintptr_t)t->data + t->byte_offset);
    return DL_OK;
}

/* A tensor through its type's DLPack exchange table, in one call instead of five attribute
 * reads: dl_check's verdict, with *t its shape (valid until control returns to Python), or
 * DL_NONE when the table is missing or failed (read the attributes instead). */
FL_INTERNAL int dl_read(PyObject *o, int want, long device, long long *ptr, DLTensorABI *t) {
    const DLExchangeABI *api = want < 0 ? NULL : dl_api_of(Py_TYPE(o));
    if (api == NULL) return DL_NONE;
    if (api->dltensor_from_py_object_no_sync(o, t) != 0) {
        PyErr_Clear();
        return DL_NONE;
    }
    return dl_check(t, want, device, ptr);
}

/* The shape of `t` as a tuple of ints (new), which compares and hashes as torch.Size does. */
FL_INTERNAL PyObject *dl_shape(const DLTensorABI *t) {
    PyObject *shape = PyTuple_New(t->ndim);
    for (int k = 0; shape != NULL && k < t->ndim; k++) {
        PyObject *v = PyLong_FromLongLong(t->shape[k]);
        if (v == NULL) Py_CLEAR(shape);
        else PyTuple_SET_ITEM(shape, k, v);
    }
    return shape;
}

/* torch_key(tensor): (pointer, key part) of a tensor through its type's DLPack exchange table
 * in one call, for ops/_replay.py's keys: the part is (shape, DLPack dtype as code | bits << 8 |
 * lanes << 16, device type << 32 | device id, C-contiguous as torch's is_contiguous() says,
 * pointer mod 16). None when the type has no table or the tensor does not export (then the
 * caller reads torch's accessors). */
FL_INTERNAL PyObject *torch_key(PyObject *self, PyObject *o) {
    const DLExchangeABI *api = dl_api_of(Py_TYPE(o));
    DLTensorABI t;
    if (api == NULL || api->dltensor_from_py_object_no_sync(o, &t) != 0 || t.ndim < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int contiguous = dl_contiguous(&t);
    long long ptr = (long long)((uintptr_t)t.data + t.byte_offset);
    long long dtype = t.dtype.code | (long long)t.dtype.bits << 8 | (long long)t.dtype.lanes << 16;
    long long device = (long long)t.device.device_type << 32 | (uint32_t)t.device.device_id;
    PyObject *shape = dl_shape(&t);
    if (shape == NULL) return NULL;
    return Py_BuildValue("(L(NLLOL))", ptr, shape, dtype, device,
                         contiguous ? Py_True : Py_False, ptr & 15);
}

/* dl_read for tests, on a CPU tensor taken as if it were on GPU `device`: (pointer, shape)
 * when accepted, False when refused, None when its type has no table. */
FL_INTERNAL PyObject *dl_view(PyObject *self, PyObject *args) {
    PyObject *o;
    int want;
    long device;
    if (!PyArg_ParseTuple(args, "Oil", &o, &want, &device)) return NULL;
    const DLExchangeABI *api = dl_api_of(Py_TYPE(o));
    if (api == NULL) Py_RETURN_NONE;
    DLTensorABI t;
    if (api->dltensor_from_py_object_no_sync(o, &t) != 0) return NULL;
    if (t.device.device_type != 1 /* kDLCPU */) Py_RETURN_FALSE;
    t.device.device_type = 2;
    t.device.device_id = (int32_t)device;
    long long ptr;
    if (dl_check(&t, want, device, &ptr) != DL_OK) Py_RETURN_FALSE;
    PyObject *shape = dl_shape(&t);
    return shape == NULL ? NULL : Py_BuildValue("(LN)", ptr, shape);
}
