/*
 * kafkatool.record._speedups: compiled twin of kafkatool.record.v2.decode_records.
 *
 * decode_records(buf, pos, end, count) decodes `count` message-format-v2 records
 * (spec §4.2) from buf[pos:end] and returns a list of tuples
 *     (attributes, timestamp_delta, offset_delta, key, value, headers)
 * with exactly the results, exception classes, messages and positions of the pure
 * Python reference in v2.py. The reference is the contract, quirks included:
 *
 *   - the one-byte fast paths of offsetDelta/keyLength/valueLength/headersCount read
 *     buf[i] without checking it against the record end (only against len(buf):
 *     Python's IndexError, which becomes "Found invalid record structure" at the
 *     record start), while the multi-byte paths are bounded by the record end and
 *     report errors at the varint's own start;
 *   - a varint is at most 5 bytes (only the top bit of the 5th is checked, value
 *     truncated to 32 bits), a varlong at most 10 (64 bits).
 *
 * Arguments: buf is any object exporting a C-contiguous buffer (read as raw bytes,
 * never copied); pos, end, count are integers (__index__). A negative count raises
 * InvalidRecordError first, as in Python; then pos and end must both lie within
 * [0, len(buf)], else ValueError (the Python version would index from the end of the
 * buffer, or past it). Every byte read is checked against the buffer length.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Module-level constants (single-phase init: the module is never re-initialised). */
static PyObject *InvalidRecordError = NULL; /* kafkatool.errors.InvalidRecordError */
static PyObject *empty_tuple = NULL;        /* shared headers value for hc == 0 */
static PyObject *kwnames_position = NULL;   /* ("position",) for vectorcall */
static PyObject *zero = NULL;               /* the int 0 */

/* Smallest possible record: 1 length byte + attributes + 5 one-byte varints. */
#define MIN_RECORD_SIZE 7
/* Smallest possible header: key-length varint + value-length varint. */
#define MIN_HEADER_SIZE 2

/* ------------------------------------------------------------------ errors */

/* Raise InvalidRecordError(msg, position=position); always returns -1. */
static int
raise_invalid_obj(PyObject *msg, PyObject *position)
{
    PyObject *args[2] = {msg, position};
    PyObject *exc = PyObject_Vectorcall(InvalidRecordError, args, 1, kwnames_position);
    if (exc == NULL)
        return -1; /* the constructor's own exception stands */
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return -1;
}

/* Raise InvalidRecordError(format % ..., position=position); always returns -1. */
static int
raise_invalid(Py_ssize_t position, const char *format, ...)
{
    va_list vargs;
    PyObject *msg, *pos;

    va_start(vargs, format);
    msg = PyUnicode_FromFormatV(format, vargs);
    va_end(vargs);
    if (msg == NULL)
        return -1;
    pos = PyLong_FromSsize_t(position);
    if (pos == NULL) {
        Py_DECREF(msg);
        return -1;
    }
    raise_invalid_obj(msg, pos);
    Py_DECREF(msg);
    Py_DECREF(pos);
    return -1;
}

/* Mark the pending exception as raised "from None" (__suppress_context__). */
static void
suppress_context(void)
{
    PyObject *type, *val, *tb;
    PyErr_Fetch(&type, &val, &tb);
    PyErr_NormalizeException(&type, &val, &tb);
    if (val != NULL && PyExceptionInstance_Check(val))
        ((PyBaseExceptionObject *)val)->suppress_context = 1;
    PyErr_Restore(type, val, tb);
}

#define STRUCTURE_MSG "Found invalid record structure"

/* ------------------------------------------------------------------ varints */

static inline int32_t
zigzag32(uint32_t raw)
{
    return (int32_t)((raw >> 1) ^ (0u - (raw & 1u)));
}

static inline int64_t
zigzag64(uint64_t raw)
{
    return (int64_t)((raw >> 1) ^ (UINT64_C(0) - (raw & UINT64_C(1))));
}

/* _slow_varint: a zig-zag varint at *pi, bytes [*pi, limit) only (limit <= buffer
 * length, so every read is in bounds). Errors are placed at the varint's start. */
static int
slow_varint(const uint8_t *buf, Py_ssize_t *pi, Py_ssize_t limit, int32_t *out)
{
    Py_ssize_t start = *pi, i = start;
    uint32_t raw = 0;
    int shift = 0;

    for (;;) {
        uint8_t b;
        if (i >= limit)
            return raise_invalid(start, STRUCTURE_MSG);
        b = buf[i++];
        raw |= (uint32_t)(b & 0x7F) << shift; /* 5th byte: bits 4-6 fall off */
        if (b < 0x80)
            break;
        shift += 7;
        if (shift >= 35)
            return raise_invalid(start, STRUCTURE_MSG
                " (Varint is too long, the most significant bit in the 5th byte is set)");
    }
    *out = zigzag32(raw);
    *pi = i;
    return 0;
}

/* _slow_varlong: as slow_varint, at most 10 bytes, 64 bits. */
static int
slow_varlong(const uint8_t *buf, Py_ssize_t *pi, Py_ssize_t limit, int64_t *out)
{
    Py_ssize_t start = *pi, i = start;
    uint64_t raw = 0;
    int shift = 0;

    for (;;) {
        uint8_t b;
        if (i >= limit)
            return raise_invalid(start, STRUCTURE_MSG);
        b = buf[i++];
        raw |= (uint64_t)(b & 0x7F) << shift; /* 10th byte: only bit 0 survives */
        if (b < 0x80)
            break;
        shift += 7;
        if (shift >= 70)
            return raise_invalid(start, STRUCTURE_MSG
                " (Varlong is too long, most significant bit in the 10th byte is set)");
    }
    *out = zigzag64(raw);
    *pi = i;
    return 0;
}

/* ------------------------------------------------------------------ decoding */

/* Decode the records; returns a new list or NULL with an exception set. */
static PyObject *
decode(const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end,
       Py_ssize_t count)
{
    PyObject *out, *key = NULL, *value = NULL, *headers = NULL;
    Py_ssize_t cap, n = 0, k, i = pos;

    /* Every decoded record occupies >= MIN_RECORD_SIZE bytes of [pos, end), so at
     * most this many can be decoded; a larger count must fail on the way. */
    cap = end > pos ? (end - pos) / MIN_RECORD_SIZE : 0;
    if (count < cap)
        cap = count;
    out = PyList_New(cap);
    if (out == NULL)
        return NULL;

    for (k = 0; k < count; k++) {
        Py_ssize_t rec_start = i, body_start, body_end;
        int32_t length = 0, od = 0, kl = 0, vl = 0, hc = 0;
        int64_t tsd = 0;
        unsigned int attrs;
        uint8_t b;
        PyObject *rec;

        /* --- length, bounded by end */
        if (i >= end) {
            raise_invalid(i, "Incorrect declared batch size, premature EOF reached");
            goto fail;
        }
        b = buf[i];
        if (b < 0x80) {
            length = zigzag32(b);
            i++;
        }
        else if (slow_varint(buf, &i, end, &length) < 0)
            goto fail;
        if (length < 0 || (Py_ssize_t)length > end - i) {
            raise_invalid(rec_start,
                "Invalid record size: expected %d bytes in record payload, but instead "
                "the buffer has only %zd remaining bytes.", (int)length, end - i);
            goto fail;
        }
        body_start = i;
        body_end = i + length; /* <= end <= buflen */
        if (length < 6)
            goto structure;

        /* --- attributes and timestampDelta: in bounds since length >= 6 */
        attrs = buf[i++];
        b = buf[i];
        if (b < 0x80) {
            tsd = zigzag64(b);
            i++;
        }
        else if (slow_varlong(buf, &i, body_end, &tsd) < 0)
            goto fail;

        /* One-byte fast path as in Python: buf[i] is checked against the buffer
         * length only (IndexError -> structure error at the record start); the
         * multi-byte path is bounded by the record end. */
#define READ_VARINT(dst)                                                      \
        do {                                                                  \
            if (i >= buflen)                                                  \
                goto index_error;                                             \
            b = buf[i];                                                       \
            if (b < 0x80) {                                                   \
                (dst) = zigzag32(b);                                          \
                i++;                                                          \
            }                                                                 \
            else if (slow_varint(buf, &i, body_end, &(dst)) < 0)              \
                goto fail;                                                    \
        } while (0)

        /* --- offsetDelta */
        READ_VARINT(od);

        /* --- key */
        READ_VARINT(kl);
        if (kl >= 0) {
            if ((Py_ssize_t)kl > body_end - i)
                goto structure;
            key = PyBytes_FromStringAndSize((const char *)buf + i, kl);
            if (key == NULL)
                goto fail;
            i += kl;
        }

        /* --- value */
        READ_VARINT(vl);
        if (vl >= 0) {
            if ((Py_ssize_t)vl > body_end - i)
                goto structure;
            value = PyBytes_FromStringAndSize((const char *)buf + i, vl);
            if (value == NULL)
                goto fail;
            i += vl;
        }

        /* --- headers */
        READ_VARINT(hc);
#undef READ_VARINT
        if (hc == 0) {
            Py_INCREF(empty_tuple);
            headers = empty_tuple;
        }
        else {
            Py_ssize_t hcap, h;

            if (hc < 0) {
                raise_invalid(rec_start, "Found invalid number of record headers %d", (int)hc);
                goto fail;
            }
            if ((Py_ssize_t)hc > body_end - i) {
                raise_invalid(rec_start,
                    "Found invalid number of record headers. %d is larger than the "
                    "remaining size of the buffer", (int)hc);
                goto fail;
            }
            /* Grown on demand: a hostile count must not cost a huge allocation
             * before the first bad header is seen. */
            hcap = hc < 8 ? hc : 8;
            headers = PyTuple_New(hcap);
            if (headers == NULL)
                goto fail;
            for (h = 0; h < hc; h++) {
                int32_t hkl = 0, hvl = 0;
                PyObject *hk, *hv, *pair;

                if (slow_varint(buf, &i, body_end, &hkl) < 0)
                    goto fail;
                if (hkl < 0) {
                    raise_invalid(rec_start, "Invalid negative header key size %d", (int)hkl);
                    goto fail;
                }
                if ((Py_ssize_t)hkl > body_end - i)
                    goto structure;
                hk = PyBytes_FromStringAndSize((const char *)buf + i, hkl);
                if (hk == NULL)
                    goto fail;
                i += hkl;
                if (slow_varint(buf, &i, body_end, &hvl) < 0) {
                    Py_DECREF(hk);
                    goto fail;
                }
                if (hvl < 0) {
                    Py_INCREF(Py_None);
                    hv = Py_None;
                }
                else {
                    if ((Py_ssize_t)hvl > body_end - i) {
                        Py_DECREF(hk);
                        goto structure;
                    }
                    hv = PyBytes_FromStringAndSize((const char *)buf + i, hvl);
                    if (hv == NULL) {
                        Py_DECREF(hk);
                        goto fail;
                    }
                    i += hvl;
                }
                pair = PyTuple_New(2);
                if (pair == NULL) {
                    Py_DECREF(hk);
                    Py_DECREF(hv);
                    goto fail;
                }
                PyTuple_SET_ITEM(pair, 0, hk);
                PyTuple_SET_ITEM(pair, 1, hv);
                if (h >= hcap) {
                    hcap = hcap > hc / 2 ? hc : hcap * 2;
                    if (_PyTuple_Resize(&headers, hcap) < 0) { /* frees headers */
                        Py_DECREF(pair);
                        goto fail;
                    }
                }
                PyTuple_SET_ITEM(headers, h, pair);
            }
            /* success means h == hc == hcap: the tuple is exactly full */
        }

        if (i != body_end) {
            raise_invalid(rec_start,
                "Invalid record size: expected to read %d bytes in record payload, "
                "but instead read %zd", (int)length, i - body_start);
            goto fail;
        }

        rec = PyTuple_New(6);
        if (rec == NULL)
            goto fail;
        PyTuple_SET_ITEM(rec, 0, PyLong_FromLong((long)attrs)); /* cached small int */
        {
            PyObject *t = PyLong_FromLongLong(tsd), *o = PyLong_FromLong((long)od);
            if (t == NULL || o == NULL) {
                Py_XDECREF(t);
                Py_XDECREF(o);
                Py_DECREF(rec);
                goto fail;
            }
            PyTuple_SET_ITEM(rec, 1, t);
            PyTuple_SET_ITEM(rec, 2, o);
        }
        if (key == NULL) {
            Py_INCREF(Py_None);
            key = Py_None;
        }
        if (value == NULL) {
            Py_INCREF(Py_None);
            value = Py_None;
        }
        PyTuple_SET_ITEM(rec, 3, key);
        PyTuple_SET_ITEM(rec, 4, value);
        PyTuple_SET_ITEM(rec, 5, headers);
        key = value = headers = NULL;
        if (n >= cap) { /* cannot happen: see cap above */
            Py_DECREF(rec);
            PyErr_SetString(PyExc_SystemError, "decode_records: record capacity exceeded");
            goto fail;
        }
        PyList_SET_ITEM(out, n, rec);
        n++;
        continue;

    structure:
        raise_invalid(rec_start, STRUCTURE_MSG);
        goto fail;
    index_error: /* Python: IndexError -> InvalidRecordError(...) from None */
        raise_invalid(rec_start, STRUCTURE_MSG);
        suppress_context();
        goto fail;
    }

    if (i != end) {
        raise_invalid(i, "Incorrect declared batch size, records still remaining in file");
        goto fail;
    }
    if (n != cap) { /* cannot happen either: success implies count <= cap */
        PyErr_SetString(PyExc_SystemError, "decode_records: record count mismatch");
        goto fail;
    }
    return out;

fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_DECREF(out); /* unset slots are NULL, which list_dealloc skips */
    return NULL;
}

/* ------------------------------------------------------------------ arguments */

static const char *const arg_names[4] = {"buf", "pos", "end", "count"};

/* Gather positional and keyword arguments (METH_FASTCALL | METH_KEYWORDS). */
static int
gather_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *slots[4])
{
    Py_ssize_t j, nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    int a;

    if (nargs > 4) {
        PyErr_Format(PyExc_TypeError,
            "decode_records() takes 4 positional arguments but %zd were given", nargs);
        return -1;
    }
    for (a = 0; a < 4; a++)
        slots[a] = a < nargs ? args[a] : NULL;
    for (j = 0; j < nkw; j++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, j);
        for (a = 0; a < 4; a++)
            if (PyUnicode_CompareWithASCIIString(name, arg_names[a]) == 0)
                break;
        if (a == 4) {
            PyErr_Format(PyExc_TypeError,
                "decode_records() got an unexpected keyword argument '%S'", name);
            return -1;
        }
        if (slots[a] != NULL) {
            PyErr_Format(PyExc_TypeError,
                "decode_records() got multiple values for argument '%s'", arg_names[a]);
            return -1;
        }
        slots[a] = args[nargs + j];
    }
    for (a = 0; a < 4; a++)
        if (slots[a] == NULL) {
            PyErr_Format(PyExc_TypeError,
                "decode_records() missing required argument '%s'", arg_names[a]);
            return -1;
        }
    return 0;
}

/* An integer argument as Py_ssize_t, saturating (range checks follow). */
static int
as_index(PyObject *obj, Py_ssize_t *out)
{
    Py_ssize_t v;
    if (PyLong_CheckExact(obj)) {
        int overflow;
        long long ll = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (ll == -1 && PyErr_Occurred())
            return -1;
        if (overflow != 0) /* saturate */
            v = overflow < 0 ? PY_SSIZE_T_MIN : PY_SSIZE_T_MAX;
        else if (ll > PY_SSIZE_T_MAX)
            v = PY_SSIZE_T_MAX;
        else if (ll < PY_SSIZE_T_MIN)
            v = PY_SSIZE_T_MIN;
        else
            v = (Py_ssize_t)ll;
    }
    else {
        PyObject *idx = PyNumber_Index(obj);
        if (idx == NULL)
            return -1;
        v = PyNumber_AsSsize_t(idx, NULL); /* NULL: clamp on overflow */
        Py_DECREF(idx);
        if (v == -1 && PyErr_Occurred())
            return -1;
    }
    *out = v;
    return 0;
}

PyDoc_STRVAR(decode_records_doc,
"decode_records(buf, pos, end, count)\n--\n\n"
"Decode ``count`` v2 records from ``buf[pos:end]`` (compiled twin of\n"
"kafkatool.record.v2.decode_records: same results, same errors).\n\n"
"Returns a list of ``(attributes, timestamp_delta, offset_delta, key, value,\n"
"headers)`` tuples. ``buf`` is any C-contiguous buffer, read as bytes; ``pos``\n"
"and ``end`` must lie within ``[0, len(buf)]`` (ValueError otherwise).");

static PyObject *
decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *slots[4], *result;
    Py_ssize_t pos, end, count;
    Py_buffer view;
    (void)module;

    if (gather_args(args, nargs, kwnames, slots) < 0)
        return NULL;

    /* count first: Python checks `count < 0` before touching anything else, and
     * formats it with f"{count}"; the position is pos exactly as given. */
    {
        int negative;
        if (PyLong_CheckExact(slots[3])) {
            int overflow;
            long long v = PyLong_AsLongLongAndOverflow(slots[3], &overflow);
            if (v == -1 && PyErr_Occurred())
                return NULL;
            negative = overflow ? overflow < 0 : v < 0;
        }
        else if ((negative = PyObject_RichCompareBool(slots[3], zero, Py_LT)) < 0)
            return NULL;
        if (negative) {
            PyObject *c = PyObject_Format(slots[3], NULL), *msg;
            if (c == NULL)
                return NULL;
            msg = PyUnicode_FromFormat("Found invalid record count %U in magic v2 batch", c);
            Py_DECREF(c);
            if (msg == NULL)
                return NULL;
            raise_invalid_obj(msg, slots[1]);
            Py_DECREF(msg);
            return NULL;
        }
    }
    if (as_index(slots[3], &count) < 0)
        return NULL;
    if (as_index(slots[1], &pos) < 0 || as_index(slots[2], &end) < 0)
        return NULL;

    if (PyObject_GetBuffer(slots[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || pos > view.len || end < 0 || end > view.len) {
        PyErr_Format(PyExc_ValueError,
            "decode_records: pos %zd and end %zd must lie within [0, %zd]",
            pos, end, view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    result = decode((const uint8_t *)view.buf, view.len, pos, end, count);
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef speedups_methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records,
     METH_FASTCALL | METH_KEYWORDS, decode_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "kafkatool.record._speedups",
    "Compiled hot paths of kafkatool.record (optional; pure-Python fallbacks exist).",
    -1,
    speedups_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m, *errors;

    if (InvalidRecordError == NULL) {
        errors = PyImport_ImportModule("kafkatool.errors");
        if (errors == NULL)
            return NULL;
        InvalidRecordError = PyObject_GetAttrString(errors, "InvalidRecordError");
        Py_DECREF(errors);
        if (InvalidRecordError == NULL)
            return NULL;
    }
    if (empty_tuple == NULL && (empty_tuple = PyTuple_New(0)) == NULL)
        return NULL;
    if (kwnames_position == NULL && (kwnames_position = Py_BuildValue("(s)", "position")) == NULL)
        return NULL;

    if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL)
        return NULL;

    m = PyModule_Create(&speedups_module);
    if (m == NULL)
        return NULL;
    return m;
}
