/* Fast answers to numpy's probes of a box (_core_probes.pxi).
 *
 * np.array([a, b]) of traced scalars asks every element for
 * __array_struct__ and __array_interface__ (then calls __array__) before it makes an
 * object array.  A box has none of them, but its tp_getattro (Cython's, for
 * the class's __getattr__ that serves numpy's method names) raised the
 * AttributeError from Python code, with a traceback: about 3 us per element,
 * most of the cost of a small-vector RK4 step.  This tp_getattro answers
 * those names with an AttributeError set in C (numpy clears it) and hands
 * every other name to the class's own tp_getattro. */
#ifndef TAPEAD_PROBES_H
#define TAPEAD_PROBES_H
#include <Python.h>

#define TAPEAD_PROBE_NAMES 2
#define TAPEAD_PROBE_TYPES 8

static PyObject *tapead_probe_names[TAPEAD_PROBE_NAMES];
static PyTypeObject *tapead_probe_types[TAPEAD_PROBE_TYPES];
static getattrofunc tapead_probe_orig[TAPEAD_PROBE_TYPES];
static int tapead_probe_ntypes = 0;

static PyObject *tapead_probe_getattro(PyObject *o, PyObject *name)
{
    int i;
    PyTypeObject *t;
    for (i = 0; i < TAPEAD_PROBE_NAMES; i++) {
        if (name == tapead_probe_names[i]) {
            PyErr_SetObject(PyExc_AttributeError, name);
            return NULL;
        }
    }
    for (t = Py_TYPE(o); t != NULL; t = t->tp_base) {
        for (i = 0; i < tapead_probe_ntypes; i++)
            if (tapead_probe_types[i] == t) return tapead_probe_orig[i](o, name);
    }
    return PyObject_GenericGetAttr(o, name);
}

/* 0 on success, -1 (with an exception) otherwise. */
static int tapead_probe_install(PyObject *type)
{
    static const char *names[TAPEAD_PROBE_NAMES] = {
        "__array_struct__", "__array_interface__"};
    PyTypeObject *t = (PyTypeObject *)type;
    int i;
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "tapead_probe_install: not a type");
        return -1;
    }
    if (tapead_probe_names[0] == NULL) {
        for (i = 0; i < TAPEAD_PROBE_NAMES; i++) {
            tapead_probe_names[i] = PyUnicode_InternFromString(names[i]);
            if (!tapead_probe_names[i]) return -1;
        }
    }
    if (t->tp_getattro == tapead_probe_getattro) return 0;
    if (tapead_probe_ntypes == TAPEAD_PROBE_TYPES) {
        PyErr_SetString(PyExc_RuntimeError, "tapead_probe_install: too many types");
        return -1;
    }
    tapead_probe_types[tapead_probe_ntypes] = t;
    tapead_probe_orig[tapead_probe_ntypes] = t->tp_getattro ? t->tp_getattro
                                                            : PyObject_GenericGetAttr;
    tapead_probe_ntypes++;
    t->tp_getattro = tapead_probe_getattro;
    PyType_Modified(t);
    return 0;
}
#endif
