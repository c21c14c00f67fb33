/* The Tile track's compiled launches (runtime/claunch.py builds this with claunch.c into one
 * module): a prepared launch packed and launched (`tile_launch`), and tile/fastpath.py's warm
 * path (`tile_warm`). Shared declarations: claunch.h. */
#include "claunch.h"

/* ----------------------------------------------------------------------------- Tile
 * A prepared Tile launch (tile/launch_gpu.py's GpuLaunch): the values that change per launch
 * (pointers and scalars, already checked by the warm path) are packed at their offsets into
 * the plan's own copy of the ParamBlock buffer (extents and strides already in it), and the
 * function is launched on a (gx, gy, gz) grid of one-thread blocks (tileiras fixes the threads
 * inside the cubin). */

typedef struct {
    launch_fn launch;
    void *function;
    unsigned grid[3];
    char *buffer;
    void **kernel_params;
    int n;
    int *kinds;
    Py_ssize_t *offsets;
} TilePlan;

/* Frees `p` and what it owns (a field tile_plan did not reach is NULL). */
static void tile_plan_release(TilePlan *p) {
    PyMem_Free(p->buffer);
    PyMem_Free(p->kernel_params);
    PyMem_Free(p->kinds);
    PyMem_Free(p->offsets);
    PyMem_Free(p);
}

static void tile_plan_free(PyObject *capsule) {
    TilePlan *p = (TilePlan *)PyCapsule_GetPointer(capsule, "fearless.claunch.tile_plan");
    if (p != NULL) tile_plan_release(p);
}

/* tile_plan(launch_address, function, gx, gy, gz, buffer_address, buffer_size, param_offsets,
 *           kinds, offsets): param_offsets, in ABI order, are where each kernel parameter lies
 * in the buffer; kinds and offsets say how and where each changing value is packed. */
FL_INTERNAL PyObject *tile_plan(PyObject *self, PyObject *args) {
    unsigned long long launch_addr, function, buffer_addr;
    unsigned gx, gy, gz;
    Py_ssize_t size;
    PyObject *param_offsets, *kinds, *offsets;
    if (!PyArg_ParseTuple(args, "KKIIIKnO!O!O!", &launch_addr, &function, &gx, &gy, &gz,
                          &buffer_addr, &size, &PyTuple_Type, &param_offsets, &PyTuple_Type,
                          &kinds, &PyTuple_Type, &offsets))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(param_offsets), n = PyTuple_GET_SIZE(kinds);
    if (PyTuple_GET_SIZE(offsets) != n) {
        PyErr_SetString(PyExc_ValueError, "one offset per kind");
        return NULL;
    }
    TilePlan *p = PyMem_Calloc(1, sizeof(TilePlan));
    if (p == NULL) return PyErr_NoMemory();
    p->launch = (launch_fn)(uintptr_t)launch_addr;
    p->function = (void *)(uintptr_t)function;
    p->grid[0] = gx; p->grid[1] = gy; p->grid[2] = gz;
    p->n = (int)n;
    p->buffer = PyMem_Calloc(size ? size : 1, 1);
    p->kernel_params = PyMem_Calloc(count ? count : 1, sizeof(void *));
    p->kinds = PyMem_Calloc(n ? n : 1, sizeof(int));
    p->offsets = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    if (!p->buffer || !p->kernel_params || !p->kinds || !p->offsets) {
        PyErr_NoMemory();
        goto fail;
    }
    if (copy_params(p->buffer, p->kernel_params, buffer_addr, size, param_offsets)) goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t kind, off;
        if (as_ssize(kinds, k, &kind) || as_ssize(offsets, k, &off)) goto fail;
        int width = kind == K_PTR || kind == K_I64 || kind == K_U64 || kind == K_F64 ? 8
                  : kind == K_I32 || kind == K_U32 || kind == K_F32 ? 4
                  : kind == K_I16 || kind == K_U16 ? 2 : 1;
        if (off < 0 || off + width > size || !((kind >= K_I8 && kind <= K_F64) ||
                                               kind == K_BOOL || kind == K_PTR)) {
            PyErr_SetString(PyExc_ValueError, "a value does not fit the buffer");
            goto fail;
        }
        p->kinds[k] = (int)kind;
        p->offsets[k] = off;
    }
    PyObject *capsule = PyCapsule_New(p, "fearless.claunch.tile_plan", tile_plan_free);
    if (capsule != NULL) return capsule;
fail:
    tile_plan_release(p);
    return NULL;
}

/* Pack `n` values into a Tile plan's buffer and launch: 0, a positive CUresult, or -1 for a
 * value that does not pack as the Python launcher would (it runs then, and says why). */
static long tile_pack_launch(TilePlan *p, PyObject *const *items, Py_ssize_t n,
                             unsigned long long stream) {
    if (n != p->n) return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = items[k];
        char *slot = p->buffer + p->offsets[k];
        int kind = p->kinds[k], ok;
        if (kind == K_PTR) {
            if (!PyLong_CheckExact(v)) return -1;
            unsigned long long u = PyLong_AsUnsignedLongLong(v);
            ok = !(u == (unsigned long long)-1 && PyErr_Occurred());
            if (ok) memcpy(slot, &u, 8);
        } else if (kind == K_BOOL) {
            ok = PyBool_Check(v);
            if (ok) { char c = v == Py_True; memcpy(slot, &c, 1); }
        } else if (kind == K_F32 || kind == K_F64) {
            ok = pack_float(slot, kind, v);
        } else {
            ok = pack_int(slot, kind, v);
        }
        if (!ok) { PyErr_Clear(); return -1; }
    }
    return p->launch(p->function, p->grid[0], p->grid[1], p->grid[2], 1, 1, 1, 0,
                     (void *)(uintptr_t)stream, p->kernel_params, NULL);
}

/* tile_launch(plan, values, stream) -> tile_pack_launch's answer. */
FL_INTERNAL PyObject *tile_launch(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    TilePlan *p = plan_arg(a, nargs, 3, "tile_launch", "fearless.claunch.tile_plan");
    if (p == NULL) return NULL;
    PyObject *values = a[1];
    if (!PyList_CheckExact(values) && !PyTuple_CheckExact(values)) return PyLong_FromLong(-1);
    unsigned long long stream = PyLong_AsUnsignedLongLong(a[2]);
    if (stream == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return PyLong_FromLong(-1);
    }
    return PyLong_FromLong(tile_pack_launch(p, PySequence_Fast_ITEMS(values),
                                            PySequence_Fast_GET_SIZE(values), stream));
}

/* ------------------------------------------------------------------------ Tile warm path
 * tile/fastpath.py's WarmPath.lookup for the common arguments, then the prepared launch:
 * each argument is read as its Python reader reads it, into the same key (the target, then
 * per parameter its part), which is looked up in `entries` (key -> (byte extent of each
 * array, the launch's tile plan), kept by WarmPath.store); the (output, other) pairs are
 * checked for overlap and the values packed and launched. Anything else returns -1 having
 * launched nothing, and Kernel.__call__ goes the Python way. */

enum { W_PART = 1, W_TENSOR = 2, W_CONST = 3, W_SCALAR = 4 };

typedef struct {
    int n, npairs;
    int *kinds;
    PyObject *wants;       /* per parameter: its fl dtype (arrays) or None */
    PyObject *torch_wants; /* per parameter: its torch dtype, or None */
    int *dl_wants;         /* per parameter: its DLPack dtype (code << 8 | bits), or -1 */
    int *pairs;
    PyObject *entries, *part_type, *tensor_type, *torch_type, *target;
    long device;
} Warm;

static PyObject *s_given_back, *s_tensor, *s_tile, *s_grid, *s_group, *s_is_cuda;

/* Frees `w` and what it owns (a field tile_warm_plan did not reach is NULL). */
static void warm_release(Warm *w) {
    Py_XDECREF(w->wants); Py_XDECREF(w->torch_wants); Py_XDECREF(w->entries);
    Py_XDECREF(w->part_type); Py_XDECREF(w->tensor_type); Py_XDECREF(w->torch_type);
    Py_XDECREF(w->target);
    PyMem_Free(w->kinds);
    PyMem_Free(w->dl_wants);
    PyMem_Free(w->pairs);
    PyMem_Free(w);
}

static void warm_free(PyObject *capsule) {
    Warm *w = (Warm *)PyCapsule_GetPointer(capsule, "fearless.claunch.warm");
    if (w != NULL) warm_release(w);
}

/* tile_warm_plan(kinds, wants, torch_wants, dl_wants, pairs, entries, part_type,
 *                tensor_type, torch_type, target, device) */
FL_INTERNAL PyObject *tile_warm_plan(PyObject *self, PyObject *args) {
    PyObject *kinds, *wants, *torch_wants, *dl_wants, *pairs, *entries, *part_type,
        *tensor_type, *torch_type, *target;
    long device;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!OOOOl", &PyTuple_Type, &kinds, &PyTuple_Type,
                          &wants, &PyTuple_Type, &torch_wants, &PyTuple_Type, &dl_wants,
                          &PyTuple_Type, &pairs, &PyDict_Type, &entries, &part_type,
                          &tensor_type, &torch_type, &target, &device))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(kinds);
    if (n > 64 || PyTuple_GET_SIZE(wants) != n || PyTuple_GET_SIZE(torch_wants) != n ||
        PyTuple_GET_SIZE(dl_wants) != n) {
        PyErr_SetString(PyExc_ValueError, "one kind and dtype per parameter, at most 64");
        return NULL;
    }
    Warm *w = PyMem_Calloc(1, sizeof(Warm));
    if (w == NULL) return PyErr_NoMemory();
    w->n = (int)n;
    w->kinds = PyMem_Calloc(n ? n : 1, sizeof(int));
    w->dl_wants = PyMem_Calloc(n ? n : 1, sizeof(int));
    w->pairs = int_rows(pairs, 2, (int)n);
    if (w->kinds == NULL || w->dl_wants == NULL || w->pairs == NULL) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    w->npairs = (int)PyTuple_GET_SIZE(pairs);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t kind, dl;
        if (as_ssize(kinds, k, &kind) || as_ssize(dl_wants, k, &dl)) goto fail;
        w->kinds[k] = (int)kind;
        w->dl_wants[k] = (int)dl;
    }
    Py_INCREF(wants); w->wants = wants;
    Py_INCREF(torch_wants); w->torch_wants = torch_wants;
    Py_INCREF(entries); w->entries = entries;
    Py_INCREF(part_type); w->part_type = part_type;
    Py_INCREF(tensor_type); w->tensor_type = tensor_type;
    Py_INCREF(torch_type); w->torch_type = torch_type;
    Py_INCREF(target); w->target = target;
    w->device = device;
    PyObject *capsule = PyCapsule_New(w, "fearless.claunch.warm", warm_free);
    if (capsule != NULL) return capsule;
fail:
    warm_release(w);
    return NULL;
}

/* An fl.Tensor on the GPU, live, of dtype `want`: its pointer and key part (new). */
static PyObject *read_fl_tensor(PyObject *t, PyObject *want, long long *ptr) {
    if (!attr_is(t, s_dtype, 0, want) || !attr_is(t, s_on_device, 0, Py_True)) return NULL;
    if (!attr_long(t, s_ptr, 0, ptr)) return NULL;
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    if (shape == NULL) return NULL;
    PyObject *part = Py_BuildValue("(LN)", *ptr & 15, shape);
    return part;
}

FL_INTERNAL PyObject *tile_warm(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    Warm *w = plan_arg(a, nargs, 3, "tile_warm", "fearless.claunch.warm");
    if (w == NULL) return NULL;
    PyObject *args = a[1];
    unsigned long long stream = PyLong_AsUnsignedLongLong(a[2]);
    if (stream == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return PyLong_FromLong(-1); }
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != w->n) return PyLong_FromLong(-1);
    PyObject *key = PyTuple_New(w->n + 1);
    if (key == NULL) return NULL;
    Py_INCREF(w->target);
    PyTuple_SET_ITEM(key, 0, w->target);
    PyObject *values[64];
    long long starts[64];
    int nvalues = 0, narrays = 0;
    long result = -1;
    for (int i = 0; i < w->n; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        PyObject *want = PyTuple_GET_ITEM(w->wants, i);
        PyObject *part = NULL;
        long long ptr = 0;
        PyTypeObject *tp = Py_TYPE(o);
        switch (w->kinds[i]) {
        case W_PART: {
            if ((PyObject *)tp != w->part_type || !attr_is(o, s_given_back, 0, Py_None)) break;
            PyObject *t = PyObject_GetAttr(o, s_tensor);
            if (t == NULL) break;
            PyObject *inner = (PyObject *)Py_TYPE(t) == w->tensor_type
                                  ? read_fl_tensor(t, want, &ptr) : NULL;
            Py_DECREF(t);
            if (inner == NULL) break;
            PyObject *tile = PyObject_GetAttr(o, s_tile), *grid = PyObject_GetAttr(o, s_grid),
                     *group = PyObject_GetAttr(o, s_group);
            if (tile && grid && group)
                part = PyTuple_Pack(5, PyTuple_GET_ITEM(inner, 0), PyTuple_GET_ITEM(inner, 1),
                                    tile, grid, group);
            Py_XDECREF(tile); Py_XDECREF(grid); Py_XDECREF(group);
            Py_DECREF(inner);
            break;
        }
        case W_TENSOR:
            if ((PyObject *)tp == w->tensor_type) {
                if (attr_is(o, s_moved, 0, Py_None)) part = read_fl_tensor(o, want, &ptr);
            } else if ((PyObject *)tp == w->torch_type) {
                DLTensorABI t;
                int verdict = dl_read(o, w->dl_wants[i], w->device, &ptr, &t);
                if (verdict == DL_OK) {
                    PyObject *shape = dl_shape(&t);
                    if (shape != NULL) part = Py_BuildValue("(LN)", ptr & 15, shape);
                    break;
                }
                if (verdict == DL_REFUSED) break;
                long long device;
                if (!attr_is(o, s_is_cuda, 0, Py_True) || !attr_long(o, s_get_device, 1, &device) ||
                    device != w->device ||
                    !attr_is(o, s_tdtype, 0, PyTuple_GET_ITEM(w->torch_wants, i)) ||
                    !attr_is(o, s_is_contiguous, 1, Py_True) || !attr_long(o, s_data_ptr, 1, &ptr))
                    break;
                PyObject *shape = PyObject_GetAttr(o, s_tshape);
                if (shape != NULL) part = Py_BuildValue("(LN)", ptr & 15, shape);
            }
            break;
        case W_CONST:
            part = PyTuple_Pack(2, (PyObject *)tp, o);
            break;
        case W_SCALAR:
            if (tp == &PyFloat_Type || tp == &PyLong_Type || tp == &PyBool_Type) {
                Py_INCREF(tp);
                part = (PyObject *)tp;
                values[nvalues++] = o; /* borrowed: args holds it */
            }
            break;
        }
        if (part == NULL) goto done;
        PyTuple_SET_ITEM(key, i + 1, part);
        if (w->kinds[i] == W_PART || w->kinds[i] == W_TENSOR) {
            PyObject *p = PyLong_FromLongLong(ptr);
            if (p == NULL) goto done;
            values[nvalues++] = p; /* owned: released below */
            starts[narrays++] = ptr;
        }
    }
    PyObject *entry = PyDict_GetItemWithError(w->entries, key); /* borrowed */
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) goto done;
    PyObject *nbytes = PyTuple_GET_ITEM(entry, 0);
    if (!PyTuple_CheckExact(nbytes) || PyTuple_GET_SIZE(nbytes) != narrays) goto done;
    for (int k = 0; k < w->npairs; k++) {
        int o = w->pairs[2 * k], t = w->pairs[2 * k + 1];
        if (o >= narrays || t >= narrays) goto done;
        long long no = PyLong_AsLongLong(PyTuple_GET_ITEM(nbytes, o));
        long long nt = PyLong_AsLongLong(PyTuple_GET_ITEM(nbytes, t));
        if (PyErr_Occurred()) goto done;
        /* an overlap, or a zero-size array: Python's find_overlap decides */
        if (no == 0 || nt == 0 || (starts[o] < starts[t] + nt && starts[t] < starts[o] + no))
            goto done;
    }
    TilePlan *p = (TilePlan *)PyCapsule_GetPointer(PyTuple_GET_ITEM(entry, 1),
                                                  "fearless.claunch.tile_plan");
    if (p == NULL) goto done;
    result = tile_pack_launch(p, values, nvalues, stream);
done:
    if (PyErr_Occurred()) PyErr_Clear();
    /* release the pointer ints made above (scalars were borrowed) */
    {
        int v = 0;
        for (int i = 0; i < w->n && v < nvalues; i++) {
            int kind = w->kinds[i];
            if (kind == W_CONST) continue;
            if (kind == W_PART || kind == W_TENSOR) Py_DECREF(values[v]);
            v++;
        }
    }
    Py_DECREF(key);
    return PyLong_FromLong(result);
}

FL_INTERNAL int tile_intern(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    INTERN(s_given_back, "_given_back") INTERN(s_tensor, "tensor") INTERN(s_tile, "tile")
    INTERN(s_grid, "grid") INTERN(s_group, "group") INTERN(s_is_cuda, "is_cuda")
#undef INTERN
    return 0;
}
