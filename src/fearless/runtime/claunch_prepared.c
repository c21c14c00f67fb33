/* Prepared SIMT launches, in C (runtime/claunch.py builds them into the module).
 *
 * `bind(plan, function, fast, gx, gy, gz, bx, by, bz, nthreads, pool, env, key)` fixes
 * everything of a `kernel.prepare(grid, block)` launch but its arguments; `run(bound, args)`
 * then launches `args[1:]` (args[0] is the PreparedLaunch itself: `k(prep, *arrays)` hands its
 * whole argument tuple over, unsliced) on the default stream. It returns 0 when the kernel was
 * launched, 1 when it was launched and FEARLESS_SYNC asks for a synchronisation, and -1 when
 * the Python launcher must run instead (nothing launched; a driver refusal too, which the
 * Python launcher then meets again and explains).
 * A launch counts itself in the error pool (`pool.launches += 1`), as the Python one does.
 *
 * The default stream is decided in claunch_streams.c, as streams.py decides it.
 */
#include "claunch_prepared.h"
#include "claunch_simt.h"
#include "claunch_streams.h"

static PyObject *s_launches, *one;

FL_INTERNAL int prepared_intern(void) {
    if ((s_launches = PyUnicode_InternFromString("launches")) == NULL) return -1;
    one = PyLong_FromLong(1);
    return one == NULL ? -1 : 0;
}

typedef struct {
    PyObject *kept; /* (plan capsule, function, fast, pool, env, key), alive while bound */
    PyObject *pool, *env, *key; /* borrowed from `kept`; env/key: FEARLESS_SYNC's dict entry */
    Plan *p;
    void *fn, *fast; /* fast: NULL when the kernel has no fast variant */
    unsigned dims[6];
    long long nthreads;
} Bound;

static void bound_release(void *owned) {
    Py_XDECREF(((Bound *)owned)->kept);
    PyMem_Free(owned);
}

/* bind(plan, function, fast, gx, gy, gz, bx, by, bz, nthreads, pool, env, key) */
FL_INTERNAL PyObject *prepared_bind(PyObject *self, PyObject *args) {
    PyObject *plan, *fn, *fast, *pool, *env, *key;
    unsigned d[6];
    long long nthreads;
    if (!PyArg_ParseTuple(args, "OOOIIIIIILOO!O", &plan, &fn, &fast, &d[0], &d[1], &d[2],
                          &d[3], &d[4], &d[5], &nthreads, &pool, &PyDict_Type, &env, &key))
        return NULL;
    Plan *p = PyCapsule_GetPointer(plan, "fearless.claunch.plan");
    if (p == NULL) return NULL;
    void *fn_address = function_address(fn);
    void *fast_address = fast == Py_None ? NULL : function_address(fast);
    if (fn_address == NULL || (fast != Py_None && fast_address == NULL)) {
        PyErr_SetString(PyExc_ValueError, "a kernel function is not an address");
        return NULL;
    }
    Bound *b = PyMem_Calloc(1, sizeof(Bound));
    if (b == NULL) return PyErr_NoMemory();
    b->kept = PyTuple_Pack(6, plan, fn, fast, pool, env, key);
    if (b->kept == NULL) { PyMem_Free(b); return NULL; }
    b->pool = pool, b->env = env, b->key = key;
    b->p = p, b->fn = fn_address, b->fast = fast_address;
    memcpy(b->dims, d, sizeof d);
    b->nthreads = nthreads;
    return owning_capsule(b, "fearless.claunch.bound", bound_release);
}

/* Whether FEARLESS_SYNC asks for a synchronisation after every launch: the value is one of
 * config.ON_WORDS in any case (config.SYNC_ON, the inline test of launch.py); unset, an off word
 * or anything else means no (config.flag warns about anything else when a launcher is built). */
static int is_on_word(const char *s, Py_ssize_t n) {
    static const char *const words[] = {"1", "true", "yes", "on"};
    for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
        if ((Py_ssize_t)strlen(words[w]) != n) continue;
        Py_ssize_t i = 0;
        for (; i < n; i++) {
            char c = words[w][i]; /* a lower-case letter or a digit */
            if (s[i] != c && !(c >= 'a' && c <= 'z' && s[i] == c - ('a' - 'A'))) break;
        }
        if (i == n) return 1;
    }
    return 0;
}

static int sync_wanted(Bound *b) {
    PyObject *v = PyDict_GetItemWithError(b->env, b->key); /* borrowed */
    if (v == NULL) { PyErr_Clear(); return 0; }
    if (PyBytes_Check(v)) return is_on_word(PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    if (PyUnicode_Check(v)) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(v, &n);
        if (s == NULL) { PyErr_Clear(); return 0; }
        return is_on_word(s, n);
    }
    return 0;
}

/* run(bound, args) */
FL_INTERNAL PyObject *prepared_run(PyObject *self, PyObject *const *a, Py_ssize_t nargs) {
    Bound *b = plan_arg(a, nargs, 2, "run", "fearless.claunch.bound");
    if (b == NULL) return NULL;
    unsigned long long stream;
    if (!default_stream(&stream)) return PyLong_FromLong(-1);
    if (simt_pack_launch(b->p, a[1], 1, b->fn, b->fast, b->dims, b->nthreads, stream) != 0)
        return PyLong_FromLong(-1); /* a driver refusal too: the Python launcher explains it */
    PyObject *count = PyObject_GetAttr(b->pool, s_launches);
    if (count == NULL) return NULL;
    PyObject *more = PyNumber_Add(count, one);
    Py_DECREF(count);
    if (more == NULL) return NULL;
    int failed = PyObject_SetAttr(b->pool, s_launches, more);
    Py_DECREF(more);
    if (failed) return NULL;
    return PyLong_FromLong(sync_wanted(b));
}
