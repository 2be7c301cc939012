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
 *     report errors at the varint's own start; so a malformed record may read up to
 *     4 bytes past its end (the four one-byte varints, the first at the end itself);
 *   - a varint is at most 5 bytes (only the top bit of the 5th is checked, value
 *     truncated to 32 bits), a varlong at most 10 (64 bits).
 *
 * decode_records_part(buf, pos, end, limit, budget, final) is the same loop, one
 * chunk of a stream at a time, so that a batch of millions of records is never one
 * list: it stops after `limit` records or `budget` bytes, and without `final` it
 * stops before a record it cannot decide from the bytes it has (see decode()).
 *
 * decode_columns_v2(...) walks the records with the same parser (parse_record and its
 * steps, the "one record" section: every record rule lives there), appending each record's fields
 * straight into Arrow-layout bytearrays (kafkatool.record.columns.RecordColumns.add_v2)
 * instead of building tuples; see its section below.
 *
 * format_v2_text(batch, data, print_data) and v2_text_formatter(decompress, limit) walk the
 * records with that same parser too, writing kafka-dump-log's text of a whole batch (the deep
 * dump's hot path) instead of building objects, and return None for anything else; see the
 * "dump text" section.
 *
 * Arguments: buf is any object exporting a C-contiguous buffer (read as raw bytes,
 * never copied); pos, end, count are integers (__index__). A negative count raises
 * InvalidRecordError first, as in Python; then pos and end must both lie within
 * [0, len(buf)], else ValueError (the Python version would index from the end of the
 * buffer, or past it). Every byte read is checked against the buffer length.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stddef.h>
#include <unistd.h>
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

/* Name what went wrong on the pending KafkaToolError (its `kind`, kafkatool.errors: verify
 * reports it as the finding kind, never matching the message). Always returns -1. */
static int
set_error_kind(const char *kind)
{
    PyObject *type, *val, *tb, *k;
    PyErr_Fetch(&type, &val, &tb);
    PyErr_NormalizeException(&type, &val, &tb);
    if (val != NULL && PyObject_TypeCheck(val, (PyTypeObject *)InvalidRecordError)) {
        k = PyUnicode_FromString(kind);
        if (k == NULL || PyObject_SetAttrString(val, "kind", k) < 0)
            PyErr_Clear(); /* the error itself still stands, with its class's kind */
        Py_XDECREF(k);
    }
    PyErr_Restore(type, val, tb);
    return -1;
}

#define RECORD_COUNT_MISMATCH "record_count_mismatch"

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

/* The record parser goes into each of its three callers' loops (a call per record costs
 * decode_records ~5%). */
#if defined(__GNUC__) || defined(__clang__)
#define REC_INLINE static inline __attribute__((always_inline))
#else
#define REC_INLINE static inline
#endif

/* What the record parser (below) found; rec_raise() gives each one's error. */
enum {
    REC_OK = 0,
    REC_EOF,          /* no byte left for the record's length */
    REC_VARINT_SHORT, /* a multi-byte varint/varlong runs into its limit */
    REC_VARINT_LONG,  /* the top bit of a varint's 5th byte is set */
    REC_VARLONG_LONG, /* the top bit of a varlong's 10th byte is set */
    REC_SIZE,         /* a negative length, or one past the end */
    REC_STRUCTURE,    /* a field past the record end */
    REC_INDEX,        /* a one-byte fast path past the buffer (Python's IndexError) */
    REC_HEADERS_NEG,  /* a negative header count */
    REC_HEADERS_BIG,  /* a header count larger than the bytes left */
    REC_HKEY_NEG,     /* a null header key */
    REC_READ,         /* the fields end before the record does */
};

/* A zig-zag varint at *pi, bytes [*pi, limit) only (limit <= buffer length, so every read is
 * in bounds): 0 and *pi past it, or REC_VARINT_SHORT (runs into limit) / REC_VARINT_LONG (top
 * bit of the 5th byte set) with *pi unchanged: both reported at the varint's start. Python's
 * _slow_varint. */
static int
varint_at(const uint8_t *buf, Py_ssize_t *pi, Py_ssize_t limit, int32_t *out)
{
    Py_ssize_t i = *pi;
    uint32_t raw = 0;
    int shift = 0;

    for (;;) {
        uint8_t b;
        if (i >= limit)
            return REC_VARINT_SHORT;
        b = buf[i++];
        raw |= (uint32_t)(b & 0x7F) << shift; /* 5th byte: bits 4-6 fall off */
        if (b < 0x80)
            break;
        shift += 7;
        if (shift >= 35)
            return REC_VARINT_LONG;
    }
    *out = zigzag32(raw);
    *pi = i;
    return 0;
}

/* As varint_at, at most 10 bytes, 64 bits (REC_VARLONG_LONG). Python's _slow_varlong. */
static int
varlong_at(const uint8_t *buf, Py_ssize_t *pi, Py_ssize_t limit, int64_t *out)
{
    Py_ssize_t i = *pi;
    uint64_t raw = 0;
    int shift = 0;

    for (;;) {
        uint8_t b;
        if (i >= limit)
            return REC_VARINT_SHORT;
        b = buf[i++];
        raw |= (uint64_t)(b & 0x7F) << shift; /* 10th byte: only bit 0 survives */
        if (b < 0x80)
            break;
        shift += 7;
        if (shift >= 70)
            return REC_VARLONG_LONG;
    }
    *out = zigzag64(raw);
    *pi = i;
    return 0;
}

/* varint_at / varlong_at with the one-byte case first, inline; the caller has checked that
 * buf[*pi] is in the buffer (not necessarily before limit: decode_records' one-byte reads). */
REC_INLINE int
varint_fast(const uint8_t *buf, Py_ssize_t *pi, Py_ssize_t limit, int32_t *out)
{
    if (buf[*pi] >= 0x80)
        return varint_at(buf, pi, limit, out);
    *out = zigzag32(buf[(*pi)++]);
    return 0;
}

REC_INLINE int
varlong_fast(const uint8_t *buf, Py_ssize_t *pi, Py_ssize_t limit, int64_t *out)
{
    if (buf[*pi] >= 0x80)
        return varlong_at(buf, pi, limit, out);
    *out = zigzag64(buf[(*pi)++]);
    return 0;
}

/* ------------------------------------------------------------------ one record
 *
 * THE parser of one v2 record (spec §4.2), shared by decode() (tuples), decode_columns_v2()
 * (Arrow buffers) and fmt_batch() (dump text): every rule of what a record is lives here
 * once. rec_frame() reads the length varint, rec_fields() the fields up to the value and
 * rec_headers() the headers and the record's end (parse_record(): all three), noting where
 * each part is. None of them raises, allocates or writes: they return REC_OK or what is wrong,
 * with what rec_raise() needs for decode_records' exact InvalidRecordError (fmt_batch just
 * falls back to the Python path, which raises it); rec_header() then walks the checked headers
 * again for the callers that use them. decode_records_part's "not decided yet" (without
 * `final`) is decode()'s own, on rec_frame()'s results. */

struct rec {
    Py_ssize_t start;      /* the length varint */
    Py_ssize_t body_start; /* the attributes byte */
    Py_ssize_t body_end;   /* the next record (rec_frame: <= end) */
    Py_ssize_t key;        /* the key bytes (kl >= 0) */
    Py_ssize_t value;      /* the value bytes (vl >= 0) */
    Py_ssize_t headers;    /* the header count (rec_fields), the first header (rec_headers) */
    int32_t length, od, kl, vl, hc; /* kl, vl < 0: null */
    int64_t tsd;
    unsigned int attrs;
    /* what rec_raise() needs: */
    Py_ssize_t err_pos; /* REC_EOF, REC_VARINT_*: where */
    Py_ssize_t err_n;   /* REC_SIZE: bytes left after the length; REC_READ: body bytes read */
    int32_t err_v;      /* REC_HEADERS_*: the count; REC_HKEY_NEG: the key length */
};

/* The length varint of the record at i, with the record bounded by end: REC_OK (r->start,
 * length, body_start, body_end set), REC_EOF (no byte at i), REC_VARINT_SHORT/LONG, REC_SIZE
 * (negative length or past end: r->length, r->err_n). */
REC_INLINE int
rec_frame(const uint8_t *buf, Py_ssize_t i, Py_ssize_t end, struct rec *r)
{
    int s;

    r->start = i;
    if (i >= end) {
        r->err_pos = i;
        return REC_EOF;
    }
    if ((s = varint_fast(buf, &i, end, &r->length)) != 0) {
        r->err_pos = i;
        return s;
    }
    if (r->length < 0 || (Py_ssize_t)r->length > end - i) {
        r->err_n = end - i;
        return REC_SIZE;
    }
    r->body_start = i;
    r->body_end = i + r->length; /* <= end <= buflen */
    return REC_OK;
}

/* A record field's varint at buf[i] into dst, in rec_fields()/rec_headers(): the one-byte
 * fast path as in Python (buf[i] checked against the buffer length only: IndexError ->
 * REC_INDEX, a structure error at the record start), the multi-byte path bounded by the
 * record end. */
#define REC_VARINT(dst)                                                       \
    do {                                                                      \
        if (i >= buflen)                                                      \
            return REC_INDEX;                                                 \
        if ((s = varint_fast(buf, &i, body_end, &(dst))) != 0) {              \
            r->err_pos = i;                                                   \
            return s;                                                         \
        }                                                                     \
    } while (0)

/* A header's varint: bounded by the record end, one-byte or not (Python's _slow_varint). */
#define REC_HVARINT(dst)                                                      \
    do {                                                                      \
        s = i < body_end ? varint_fast(buf, &i, body_end, &(dst)) : REC_VARINT_SHORT; \
        if (s != 0) {                                                         \
            r->err_pos = i;                                                   \
            return s;                                                         \
        }                                                                     \
    } while (0)

/* The body of the record rec_frame() framed, in two steps (Python's order of checks):
 * rec_fields() reads attributes, timestampDelta, offsetDelta, key and value, rec_headers() the
 * header count, every header and the record's end. Each returns REC_OK with its fields and
 * spans set, or the first thing wrong (REC_STRUCTURE, REC_INDEX, REC_VARINT_*; then
 * REC_HEADERS_NEG, REC_HEADERS_BIG, REC_HKEY_NEG, REC_READ). `buflen` bounds the one-byte
 * fast paths, which may read up to LOOKAHEAD bytes past body_end (the file comment).
 * decode() and decode_columns_v2() copy the key and value between the two steps: the copy
 * brings in the cache lines the header count is read from (parsing the whole record first
 * and copying afterwards measured ~6% slower in decode_records). */
REC_INLINE int
rec_fields(const uint8_t *buf, Py_ssize_t buflen, struct rec *r)
{
    Py_ssize_t i = r->body_start, body_end = r->body_end;
    int s;

    if (r->length < 6)
        return REC_STRUCTURE;

    /* --- attributes and timestampDelta: in bounds since length >= 6 */
    r->attrs = buf[i++];
    if ((s = varlong_fast(buf, &i, body_end, &r->tsd)) != 0) {
        r->err_pos = i;
        return s;
    }

    /* --- offsetDelta, key, value */
    REC_VARINT(r->od);
    REC_VARINT(r->kl);
    r->key = i;
    if (r->kl >= 0) {
        if ((Py_ssize_t)r->kl > body_end - i)
            return REC_STRUCTURE;
        i += r->kl;
    }
    REC_VARINT(r->vl);
    r->value = i;
    if (r->vl >= 0) {
        if ((Py_ssize_t)r->vl > body_end - i)
            return REC_STRUCTURE;
        i += r->vl;
    }
    r->headers = i; /* the header count, for rec_headers() */
    return REC_OK;
}

/* rec_fields()' second step (see there). */
REC_INLINE int
rec_headers(const uint8_t *buf, Py_ssize_t buflen, struct rec *r)
{
    Py_ssize_t i = r->headers, body_end = r->body_end;
    int32_t h, hc;
    int s;

    /* --- headers: count, then each key (not null) and value */
    REC_VARINT(r->hc);
    hc = r->hc;
    r->headers = i;
    if (hc != 0) {
        if (hc < 0) {
            r->err_v = hc;
            return REC_HEADERS_NEG;
        }
        if ((Py_ssize_t)hc > body_end - i) {
            r->err_v = hc;
            return REC_HEADERS_BIG;
        }
        for (h = 0; h < hc; h++) {
            int32_t hkl = 0, hvl = 0;
            REC_HVARINT(hkl);
            if (hkl < 0) {
                r->err_v = hkl;
                return REC_HKEY_NEG;
            }
            if ((Py_ssize_t)hkl > body_end - i)
                return REC_STRUCTURE;
            i += hkl;
            REC_HVARINT(hvl);
            if (hvl >= 0) {
                if ((Py_ssize_t)hvl > body_end - i)
                    return REC_STRUCTURE;
                i += hvl;
            }
        }
    }

    if (i != body_end) {
        r->err_n = i - r->body_start;
        return REC_READ;
    }
    return REC_OK;
}

#undef REC_VARINT
#undef REC_HVARINT

/* rec_frame(), rec_fields(), rec_headers(): the whole record at i, bounded by end (decode()'s
 * final mode). */
REC_INLINE int
parse_record(const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t i, Py_ssize_t end, struct rec *r)
{
    int s = rec_frame(buf, i, end, r);
    if (s == REC_OK)
        s = rec_fields(buf, buflen, r);
    return s != REC_OK ? s : rec_headers(buf, buflen, r);
}

/* The header at *pi of a record rec_headers() accepted (so nothing is checked again): its key at
 * *ko (*kl bytes, >= 0) and value at *vo (*vl bytes, < 0 for null); *pi moves past it. */
REC_INLINE void
rec_header(const uint8_t *buf, Py_ssize_t *pi, Py_ssize_t body_end, Py_ssize_t *ko, int32_t *kl,
           Py_ssize_t *vo, int32_t *vl)
{
    Py_ssize_t i = *pi;
    (void)varint_fast(buf, &i, body_end, kl);
    *ko = i;
    i += *kl;
    (void)varint_fast(buf, &i, body_end, vl);
    *vo = i;
    if (*vl > 0)
        i += *vl;
    *pi = i;
}

/* Raise decode_records' InvalidRecordError for what the record parser returned (s !=
 * REC_OK) about record r. Always returns -1. */
static int
rec_raise(const struct rec *r, int s)
{
    switch (s) {
    case REC_EOF:
        raise_invalid(r->err_pos, "Incorrect declared batch size, premature EOF reached");
        return set_error_kind(RECORD_COUNT_MISMATCH);
    case REC_VARINT_SHORT:
        return raise_invalid(r->err_pos, STRUCTURE_MSG);
    case REC_VARINT_LONG:
        return raise_invalid(r->err_pos, STRUCTURE_MSG
            " (Varint is too long, the most significant bit in the 5th byte is set)");
    case REC_VARLONG_LONG:
        return raise_invalid(r->err_pos, STRUCTURE_MSG
            " (Varlong is too long, most significant bit in the 10th byte is set)");
    case REC_SIZE:
        return raise_invalid(r->start,
            "Invalid record size: expected %d bytes in record payload, but instead "
            "the buffer has only %zd remaining bytes.", (int)r->length, r->err_n);
    case REC_STRUCTURE:
        return raise_invalid(r->start, STRUCTURE_MSG);
    case REC_INDEX: /* Python: IndexError -> InvalidRecordError(...) from None */
        raise_invalid(r->start, STRUCTURE_MSG);
        suppress_context();
        return -1;
    case REC_HEADERS_NEG:
        return raise_invalid(r->start, "Found invalid number of record headers %d", (int)r->err_v);
    case REC_HEADERS_BIG:
        return raise_invalid(r->start,
            "Found invalid number of record headers. %d is larger than the "
            "remaining size of the buffer", (int)r->err_v);
    case REC_HKEY_NEG:
        return raise_invalid(r->start, "Invalid negative header key size %d", (int)r->err_v);
    case REC_READ:
        return raise_invalid(r->start,
            "Invalid record size: expected to read %d bytes in record payload, "
            "but instead read %zd", (int)r->length, r->err_n);
    default:
        PyErr_SetString(PyExc_SystemError, "_speedups: unknown record status");
        return -1;
    }
}

/* ------------------------------------------------------------------ decoding */

/* Why decode() stopped before `count` records (decode_records_part's status). */
#define PART_DONE 0     /* the record or byte budget is spent (or count reached) */
#define PART_MORE 1     /* not final: the next record is not complete in [pos, end) */
#define PART_NEED_END 2 /* not final: the next record's length is negative, and its
                           error message names the bytes left to the stream's end */

/* A record's one-byte fast paths may read up to 4 bytes past its own end (see the
 * file comment): a record is decided only when they are in the buffer, or at the end. */
#define LOOKAHEAD 4

/* Decode up to `count` records from buf[pos:end], stopping early once `budget` bytes
 * have been decoded (after at least one record). With `final` set, [pos, end) is all
 * there is: running out of bytes is an error, as in Python's decode_records. Without
 * it, more bytes may follow `end`: decode() stops, without an error, before a record
 * it cannot decide yet (PART_MORE, PART_NEED_END), so that the caller can read more
 * and call again from *pos_out. Returns a new list or NULL with an exception set. */
static PyObject *
decode(const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t pos, Py_ssize_t end,
       Py_ssize_t count, Py_ssize_t budget, int final, Py_ssize_t *pos_out, int *status)
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

    *status = PART_DONE;
    for (k = 0; k < count; k++) {
        struct rec r;
        int s;
        PyObject *rec;

        if (n > 0 && i - pos >= budget)
            break; /* PART_DONE */

        s = rec_frame(buf, i, end, &r);
        if (s != REC_OK && !final) {
            /* Not decided yet? No byte for the length, a length varint that runs into end
             * (it is complete or too long once 5 bytes are there), a length past end. */
            if (s == REC_EOF || s == REC_VARINT_SHORT) {
                *status = PART_MORE;
                break;
            }
            if (s == REC_SIZE) {
                *status = r.length < 0 ? PART_NEED_END : PART_MORE;
                break;
            }
        }
        if (s == REC_OK && !final && end - r.body_end < LOOKAHEAD) {
            *status = PART_MORE; /* the one-byte fast paths may read past body_end */
            break;
        }
        if (s == REC_OK)
            s = rec_fields(buf, buflen, &r);
        if (s != REC_OK) {
            rec_raise(&r, s);
            goto fail;
        }
        if (r.kl >= 0 && (key = PyBytes_FromStringAndSize((const char *)buf + r.key, r.kl)) == NULL)
            goto fail;
        if (r.vl >= 0 && (value = PyBytes_FromStringAndSize((const char *)buf + r.value, r.vl)) == NULL)
            goto fail;
        if ((s = rec_headers(buf, buflen, &r)) != REC_OK) {
            rec_raise(&r, s);
            goto fail;
        }
        i = r.body_end;

        if (r.hc == 0)
            headers = Py_NewRef(empty_tuple);
        else {
            /* rec_headers() walked all r.hc headers (>= MIN_HEADER_SIZE bytes each) in the
             * record: the tuple is as large as the bytes allow, not as a count claims. */
            Py_ssize_t j = r.headers, h;
            headers = PyTuple_New(r.hc);
            if (headers == NULL)
                goto fail;
            for (h = 0; h < r.hc; h++) {
                Py_ssize_t ko, vo;
                int32_t hkl = 0, hvl = 0;
                PyObject *hk, *hv, *pair;

                rec_header(buf, &j, r.body_end, &ko, &hkl, &vo, &hvl);
                hk = PyBytes_FromStringAndSize((const char *)buf + ko, hkl);
                if (hk == NULL)
                    goto fail;
                if (hvl < 0)
                    hv = Py_NewRef(Py_None);
                else if ((hv = PyBytes_FromStringAndSize((const char *)buf + vo, hvl)) == NULL) {
                    Py_DECREF(hk);
                    goto fail;
                }
                pair = PyTuple_New(2);
                if (pair == NULL) {
                    Py_DECREF(hk);
                    Py_DECREF(hv);
                    goto fail;
                }
                PyTuple_SET_ITEM(pair, 0, hk);
                PyTuple_SET_ITEM(pair, 1, hv);
                PyTuple_SET_ITEM(headers, h, pair);
            }
        }

        rec = PyTuple_New(6);
        if (rec == NULL)
            goto fail;
        PyTuple_SET_ITEM(rec, 0, PyLong_FromLong((long)r.attrs)); /* cached small int */
        {
            PyObject *t = PyLong_FromLongLong(r.tsd), *o = PyLong_FromLong((long)r.od);
            if (t == NULL || o == NULL) {
                Py_XDECREF(t);
                Py_XDECREF(o);
                Py_DECREF(rec);
                goto fail;
            }
            PyTuple_SET_ITEM(rec, 1, t);
            PyTuple_SET_ITEM(rec, 2, o);
        }
        if (key == NULL)
            key = Py_NewRef(Py_None);
        if (value == NULL)
            value = Py_NewRef(Py_None);
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
    }

    if (n < cap) /* stopped early: drop the unused (NULL) slots */
        Py_SET_SIZE(out, n);
    *pos_out = i;
    return out;

fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers); /* unset slots are NULL, which tuple_dealloc skips */
    Py_DECREF(out);      /* and list_dealloc */
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
            set_error_kind(RECORD_COUNT_MISMATCH);
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
    {
        Py_ssize_t i = pos;
        int status;
        result = decode((const uint8_t *)view.buf, view.len, pos, end, count, PY_SSIZE_T_MAX, 1,
                        &i, &status);
        if (result != NULL && i != end) {
            Py_CLEAR(result);
            raise_invalid(i, "Incorrect declared batch size, records still remaining in file");
            set_error_kind(RECORD_COUNT_MISMATCH);
        }
    }
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(decode_records_part_doc,
"decode_records_part(buf, pos, end, limit, budget, final, /)\n--\n\n"
"Decode at most ``limit`` v2 records from ``buf[pos:end]``, one chunk of a stream\n"
"(compiled twin of kafkatool.record.v2.decode_records_part: same results, same\n"
"errors). Stops after the record that reaches ``budget`` decoded bytes.\n\n"
"Returns ``(records, next_pos, status)``: status 0 when ``limit`` or ``budget`` was\n"
"reached; without ``final`` (more bytes may follow ``end``), 1 when the next record\n"
"is not complete yet and 2 when its length is negative (its error needs the stream's\n"
"end). With ``final`` set, running out of bytes raises as decode_records does. The\n"
"check that nothing follows the last record is the caller's.");

static PyObject *
decode_records_part(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t pos, end, limit, budget, next;
    int final, status = PART_DONE;
    PyObject *records, *result;
    Py_buffer view;
    (void)module;

    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError,
            "decode_records_part() takes 6 positional arguments but %zd were given", nargs);
        return NULL;
    }
    if (as_index(args[1], &pos) < 0 || as_index(args[2], &end) < 0
        || as_index(args[3], &limit) < 0 || as_index(args[4], &budget) < 0)
        return NULL;
    if ((final = PyObject_IsTrue(args[5])) < 0)
        return NULL;
    if (limit < 0 || budget < 0) {
        PyErr_SetString(PyExc_ValueError, "decode_records_part: limit and budget must be >= 0");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || pos > view.len || end < 0 || end > view.len) {
        PyErr_Format(PyExc_ValueError,
            "decode_records_part: pos %zd and end %zd must lie within [0, %zd]",
            pos, end, view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    next = pos;
    records = decode((const uint8_t *)view.buf, view.len, pos, end, limit, budget, final,
                     &next, &status);
    PyBuffer_Release(&view);
    if (records == NULL)
        return NULL;
    result = Py_BuildValue("(Nni)", records, next, status);
    return result;
}

/* ==================================================================== dump text
 *
 * format_v2_text(batch, data, print_data) is kafka-dump-log's text of one batch under
 * `kafkatool dump --deep-iteration` (kafkatool/render/text.py: batch_line() and the
 * record lines of _fast_v2_lines() with the string decoders, spec §15.3), built in one
 * buffer: the batch line and one "| offset: ..." line per record, each newline-terminated.
 * `batch` is the walker's Batch tuple, `data` the whole entry (log overhead included).
 *
 * Returns (text, first_offset, last_offset), or None for anything it does not handle, and
 * the caller then takes the Python path, which prints exactly what it prints today (errors
 * included): a legacy, compressed or control batch, a record count of 0 or above
 * FMT_MAX_RECORDS (v2.CHUNK_RECORDS: larger batches go out in chunks), any record that
 * decode() rejects (the same parser, parse_record(): what it accepts is what
 * decode_records accepts), bytes left after the last record, offsets that are not
 * consecutive inside the batch (the Python path records the gap), a value that overflows
 * int64 (Python prints the big int), a header field that is not an int, and text longer
 * than FMT_MAX_TEXT (memory per call stays bounded). Keys, payloads and header keys that
 * are not ASCII are decoded as Java's new String(bytes, UTF_8) does (CPython's own decoder
 * with kafkatool.record.javautf8's error handler, not a copy) and appended as UTF-8.
 */

#define FMT_MAX_RECORDS 2048          /* v2.CHUNK_RECORDS */
#define FMT_MAX_TEXT (8 << 20)        /* bytes of text per call */

struct tbuf {
    char *p;
    Py_ssize_t n, cap;
    int ascii; /* nothing but ASCII written so far */
};

/* Room for `extra` more bytes: 0, -1 with MemoryError, or 1 when FMT_MAX_TEXT would be passed. */
static int
tbuf_grow(struct tbuf *t, Py_ssize_t extra)
{
    Py_ssize_t need = t->n + extra, cap = t->cap ? t->cap : 4096;
    char *q;
    if (extra > FMT_MAX_TEXT || need > FMT_MAX_TEXT)
        return 1;
    while (cap < need)
        cap *= 2;
    if (cap > FMT_MAX_TEXT)
        cap = FMT_MAX_TEXT;
    q = PyMem_Realloc(t->p, cap);
    if (q == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->p = q;
    t->cap = cap;
    return 0;
}

#define TROOM(t, extra) ((t)->n + (Py_ssize_t)(extra) <= (t)->cap ? 0 : tbuf_grow((t), (extra)))

static inline void
tput(struct tbuf *t, const char *s, Py_ssize_t n)
{
    memcpy(t->p + t->n, s, n);
    t->n += n;
}

#define TLIT(t, lit) tput((t), (lit), (Py_ssize_t)sizeof(lit) - 1)

/* Decimal int64 (at most 20 characters; room checked by the caller). */
static inline void
tput_i64(struct tbuf *t, int64_t v)
{
    char tmp[24];
    int k = 24;
    uint64_t u = v < 0 ? UINT64_C(0) - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--k] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--k] = '-';
    tput(t, tmp + k, 24 - k);
}

static inline int
fmt_all_ascii(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    uint64_t acc = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        acc |= w;
    }
    for (; i < n; i++)
        acc |= s[i];
    return !(acc & UINT64_C(0x8080808080808080));
}

/* bytes(s[:n]).decode("utf-8", "kafkatool-java-utf8") (Java's new String(s, UTF_8): the error handler
 * kafkatool.record.javautf8 registers; speedups.py imports it before this runs), appended as UTF-8:
 * 0, -1 (exception set), 1 (too long). */
static int
tput_text(struct tbuf *t, const uint8_t *s, Py_ssize_t n)
{
    PyObject *u;
    const char *e;
    Py_ssize_t m;
    int r;
    if (fmt_all_ascii(s, n)) {
        if ((r = TROOM(t, n)) != 0)
            return r;
        tput(t, (const char *)s, n);
        return 0;
    }
    u = PyUnicode_DecodeUTF8((const char *)s, n, "kafkatool-java-utf8");
    if (u == NULL)
        return -1;
    e = PyUnicode_AsUTF8AndSize(u, &m);
    if (e == NULL) {
        Py_DECREF(u);
        return -1;
    }
    if ((r = TROOM(t, m)) == 0) {
        tput(t, e, m);
        t->ascii = 0;
    }
    Py_DECREF(u);
    return r;
}

/* Kafka's DefaultRecordBatch.incrementSequence (batch.increment_sequence): wraps past Int.MAX. */
static inline int64_t
fmt_sequence(int64_t bseq, int64_t delta)
{
    if (bseq == -1)
        return -1;
    if (bseq > INT64_C(2147483647) - delta)
        return delta - (INT64_C(2147483647) - bseq) - 1;
    return bseq + delta;
}

static const char *const fmt_bool[2] = {"false", "true"};

/* A batch's 15 fields (the walker's Batch tuple) as int64: 1, or 0 when one is not an int or
 * does not fit (a legacy batch's count None: the Python path), -1 with TypeError when `bt` is
 * not a 15-tuple. */
static int
fmt_fields(PyObject *bt, int64_t f[15])
{
    Py_ssize_t k;
    if (!PyTuple_Check(bt) || PyTuple_GET_SIZE(bt) != 15) {
        PyErr_SetString(PyExc_TypeError, "format_v2_text: batch must be a Batch (a tuple of 15 fields)");
        return -1;
    }
    for (k = 0; k < 15; k++) {
        PyObject *o = PyTuple_GET_ITEM(bt, k);
        int overflow = 0;
        if (!PyLong_Check(o))
            return 0;
        f[k] = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow)
            return 0;
        if (f[k] == -1 && PyErr_Occurred())
            return -1;
    }
    return 1;
}

/* position, size, offset, magic, crc, attributes, last_offset_delta, base_timestamp,
 * max_timestamp, producer_id, producer_epoch, base_sequence, count, ple, computed_crc */
enum { F_POS, F_SIZE, F_BASE, F_MAGIC, F_CRC, F_ATTRS, F_LOD, F_BTS, F_MTS, F_PID, F_EPOCH, F_BSEQ, F_COUNT, F_PLE,
       F_COMPUTED };

/* What every path checks before it reads a record: a v2 data batch (not control) of 1 to
 * FMT_MAX_RECORDS records, its fields in range, its size within the `len` bytes given. */
static int
fmt_takes(const int64_t f[15], Py_ssize_t len)
{
    int64_t last;
    return f[F_MAGIC] == 2 && !(f[F_ATTRS] & 0x20) && f[F_COUNT] > 0 && f[F_COUNT] <= FMT_MAX_RECORDS
        && f[F_SIZE] >= 61 && f[F_SIZE] <= (int64_t)len
        && f[F_BSEQ] >= INT32_MIN && f[F_BSEQ] <= INT32_MAX && f[F_LOD] >= INT32_MIN && f[F_LOD] <= INT32_MAX
        && !__builtin_add_overflow(f[F_BASE], f[F_LOD], &last);
}

static const char *const fmt_codec[5] = {"none", "gzip", "snappy", "lz4", "zstd"};

/* The text of a batch (fields `f`, fmt_takes() true, codec 0-4) whose records are
 * buf[start:end]: the entry itself (start 61) or its decompressed records (start 0). `buflen`
 * is what the parser's one-byte fast paths check against, as in decode(). Returns the
 * (text, first, last) tuple, None (the Python path), or NULL with an exception set. */
static PyObject *
fmt_batch(const int64_t f[15], const uint8_t *buf, Py_ssize_t buflen, Py_ssize_t start, Py_ssize_t end,
          int print_data)
{
    PyObject *res = NULL;
    int lat = (f[F_ATTRS] & 0x08) != 0, r;
    Py_ssize_t k, i;
    int64_t base = f[F_BASE], lod = f[F_LOD], bts = f[F_BTS], mts = f[F_MTS], bseq = f[F_BSEQ],
            count = f[F_COUNT], prev = 0, first = 0;
    struct tbuf t = {NULL, 0, 0, 1};

    /* --- the batch line (batch_line) */
    if ((r = TROOM(&t, 640)) != 0)
        goto stop;
    TLIT(&t, "baseOffset: ");
    tput_i64(&t, base);
    TLIT(&t, " lastOffset: ");
    tput_i64(&t, base + lod); /* fmt_takes() checked the overflow */
    TLIT(&t, " count: ");
    tput_i64(&t, count);
    TLIT(&t, " baseSequence: ");
    tput_i64(&t, bseq);
    TLIT(&t, " lastSequence: ");
    tput_i64(&t, fmt_sequence(bseq, lod));
    TLIT(&t, " producerId: ");
    tput_i64(&t, f[F_PID]);
    TLIT(&t, " producerEpoch: ");
    tput_i64(&t, f[F_EPOCH]);
    TLIT(&t, " partitionLeaderEpoch: ");
    tput_i64(&t, f[F_PLE]);
    TLIT(&t, " isTransactional: ");
    {
        const char *s = fmt_bool[(f[F_ATTRS] & 0x10) != 0];
        tput(&t, s, (Py_ssize_t)strlen(s));
    }
    TLIT(&t, " isControl: false deleteHorizonMs: ");
    if (f[F_ATTRS] & 0x40) {
        TLIT(&t, "OptionalLong[");
        tput_i64(&t, bts);
        TLIT(&t, "]");
    }
    else
        TLIT(&t, "OptionalLong.empty");
    TLIT(&t, " position: ");
    tput_i64(&t, f[F_POS]);
    if (lat)
        TLIT(&t, " LogAppendTime: ");
    else
        TLIT(&t, " CreateTime: ");
    tput_i64(&t, mts);
    TLIT(&t, " size: ");
    tput_i64(&t, f[F_SIZE]);
    TLIT(&t, " magic: 2 compresscodec: ");
    {
        const char *s = fmt_codec[f[F_ATTRS] & 0x07];
        tput(&t, s, (Py_ssize_t)strlen(s));
    }
    TLIT(&t, " crc: ");
    tput_i64(&t, f[F_CRC]);
    if (f[F_CRC] == f[F_COMPUTED])
        TLIT(&t, " isvalid: true\n");
    else
        TLIT(&t, " isvalid: false\n");

    /* --- the records: parse_record() (decode()'s rules, final, no budget), each line
     * written once its record is accepted */
    i = start;
    for (k = 0; k < count; k++) {
        struct rec rc;
        int32_t h;
        int64_t off, ts;

        if (parse_record(buf, buflen, i, end, &rc) != REC_OK)
            goto fallback; /* decode() raises: the Python path does */
        i = rc.body_end;

        if (__builtin_add_overflow(base, (int64_t)rc.od, &off))
            goto fallback;
        if (k == 0)
            first = off;
        else if (off != prev + 1)
            goto fallback; /* a gap inside the batch: the Python path records it */
        prev = off;
        if (lat)
            ts = mts;
        else if (__builtin_add_overflow(bts, rc.tsd, &ts))
            goto fallback;

        if ((r = TROOM(&t, 200)) != 0)
            goto stop;
        TLIT(&t, "| offset: ");
        tput_i64(&t, off);
        if (lat)
            TLIT(&t, " LogAppendTime: ");
        else
            TLIT(&t, " CreateTime: ");
        tput_i64(&t, ts);
        TLIT(&t, " keySize: ");
        tput_i64(&t, rc.kl < 0 ? -1 : rc.kl);
        TLIT(&t, " valueSize: ");
        tput_i64(&t, rc.vl < 0 ? -1 : rc.vl);
        TLIT(&t, " sequence: ");
        tput_i64(&t, fmt_sequence(bseq, rc.od));
        TLIT(&t, " headerKeys: [");
        {
            Py_ssize_t j = rc.headers;
            for (h = 0; h < rc.hc; h++) {
                Py_ssize_t hko, hvo;
                int32_t hkl = 0, hvl = 0;
                rec_header(buf, &j, rc.body_end, &hko, &hkl, &hvo, &hvl);
                if (h > 0) {
                    if ((r = TROOM(&t, 1)) != 0)
                        goto stop;
                    TLIT(&t, ",");
                }
                if ((r = tput_text(&t, buf + hko, hkl)) != 0)
                    goto stop;
            }
        }
        if ((r = TROOM(&t, 32)) != 0)
            goto stop;
        TLIT(&t, "]");
        if (print_data) {
            if (rc.kl >= 0) {
                TLIT(&t, " key: ");
                if ((r = tput_text(&t, buf + rc.key, rc.kl)) != 0)
                    goto stop;
            }
            if (rc.vl >= 0) {
                if ((r = TROOM(&t, 16)) != 0)
                    goto stop;
                TLIT(&t, " payload: ");
                if ((r = tput_text(&t, buf + rc.value, rc.vl)) != 0)
                    goto stop;
            }
        }
        if ((r = TROOM(&t, 1)) != 0)
            goto stop;
        TLIT(&t, "\n");
    }
    if (i != end)
        goto fallback; /* "records still remaining" */
    {
        PyObject *text;
        if (t.ascii) {
            text = PyUnicode_New(t.n, 127);
            if (text != NULL)
                memcpy(PyUnicode_DATA(text), t.p, t.n);
        }
        else
            text = PyUnicode_DecodeUTF8(t.p, t.n, "strict");
        if (text != NULL)
            res = Py_BuildValue("(NLL)", text, (long long)first, (long long)prev);
    }
    goto done;

stop: /* r: -1 error set (MemoryError, or the decoder's), 1 too long */
    if (r < 0)
        goto done;
fallback:
    res = Py_NewRef(Py_None);
done:
    PyMem_Free(t.p);
    return res;
}

PyDoc_STRVAR(format_v2_text_doc,
"format_v2_text(batch, data, print_data, /)\n--\n\n"
"kafka-dump-log's text of one uncompressed v2 data batch under a deep dump: its batch\n"
"line and one line per record, with keys and payloads when ``print_data`` (the string\n"
"decoder). Returns ``(text, first_offset, last_offset)``, or None for anything it does\n"
"not handle (legacy, compressed, control or empty batches, more than 2048 records, any\n"
"record decode_records rejects, offsets not consecutive inside the batch, values past\n"
"int64, more than 8 MiB of text): the caller then takes the Python path.");

static PyObject *
format_v2_text(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t f[15];
    int print_data, ok;
    Py_buffer view;
    PyObject *res;
    (void)module;

    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "format_v2_text() takes 3 positional arguments but %zd were given", nargs);
        return NULL;
    }
    if ((ok = fmt_fields(args[0], f)) <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    if ((print_data = PyObject_IsTrue(args[2])) < 0)
        return NULL;
    if (f[F_ATTRS] & 0x07)
        Py_RETURN_NONE; /* compressed: see v2_text_formatter */
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (fmt_takes(f, view.len))
        res = fmt_batch(f, (const uint8_t *)view.buf, view.len, 61, (Py_ssize_t)f[F_SIZE], print_data);
    else
        res = Py_NewRef(Py_None);
    PyBuffer_Release(&view);
    return res;
}

/* ------------------------------------------------------------------ v2_text_formatter
 *
 * v2_text_formatter(decompress, limit) is format_v2_text that also takes compressed batches
 * (codecs 1-4): it calls decompress(codec, payload, limit) on the records section (a
 * memoryview of data[61:size]) and reads the records from the bytes it returns, exactly as
 * the Python path reads them from kafkatool.record.compression's stream (whose chunks joined
 * are what decompress() returns). Any Exception from decompress (corrupt stream, output
 * above `limit`, a codec library missing) means None: the Python path then raises its own
 * error, located and worded as today. `limit` (at most the dump's max_decompressed) also
 * bounds the memory of one call. An object with vectorcall, so that calling it costs what
 * calling format_v2_text costs (a deep dump calls it once per batch).
 */

typedef struct {
    PyObject_HEAD
    PyObject *decompress;
    PyObject *limit;
    vectorcallfunc vectorcall;
} TextFormatter;

static PyObject *
textfmt_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    TextFormatter *tf = (TextFormatter *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int64_t f[15];
    int print_data, ok;
    Py_buffer view;
    PyObject *res = NULL;

    if (nargs != 3 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_Format(PyExc_TypeError, "v2 text formatter takes 3 positional arguments (batch, data, print_data)");
        return NULL;
    }
    if ((ok = fmt_fields(args[0], f)) <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    if ((print_data = PyObject_IsTrue(args[2])) < 0)
        return NULL;
    if ((f[F_ATTRS] & 0x07) > 4)
        Py_RETURN_NONE;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!fmt_takes(f, view.len))
        res = Py_NewRef(Py_None);
    else if (!(f[F_ATTRS] & 0x07))
        res = fmt_batch(f, (const uint8_t *)view.buf, view.len, 61, (Py_ssize_t)f[F_SIZE], print_data);
    else {
        PyObject *payload, *codec, *out = NULL;
        /* a slice of `data` itself (a memoryview slice keeps its exporter alive; bytes are copied) */
        payload = PySequence_GetSlice(args[1], 61, (Py_ssize_t)f[F_SIZE]);
        codec = PyLong_FromLong((long)(f[F_ATTRS] & 0x07));
        if (payload != NULL && codec != NULL) {
            PyObject *call_args[3] = {codec, payload, tf->limit};
            out = PyObject_Vectorcall(tf->decompress, call_args, 3, NULL);
        }
        Py_XDECREF(payload);
        Py_XDECREF(codec);
        if (out == NULL) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) { /* not KeyboardInterrupt and the like */
                PyErr_Clear();
                res = Py_NewRef(Py_None);
            }
        }
        else {
            Py_buffer dv;
            if (PyObject_GetBuffer(out, &dv, PyBUF_SIMPLE) == 0) {
                res = fmt_batch(f, (const uint8_t *)dv.buf, dv.len, 0, dv.len, print_data);
                PyBuffer_Release(&dv);
            }
            Py_DECREF(out);
        }
    }
    PyBuffer_Release(&view);
    return res;
}

static int
textfmt_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((TextFormatter *)self)->decompress);
    Py_VISIT(((TextFormatter *)self)->limit);
    return 0;
}

static int
textfmt_clear(PyObject *self)
{
    Py_CLEAR(((TextFormatter *)self)->decompress);
    Py_CLEAR(((TextFormatter *)self)->limit);
    return 0;
}

static void
textfmt_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    textfmt_clear(self);
    PyObject_GC_Del(self);
}

static PyTypeObject TextFormatterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kafkatool.record._speedups.V2TextFormatter",
    .tp_basicsize = sizeof(TextFormatter),
    .tp_dealloc = textfmt_dealloc,
    .tp_vectorcall_offset = offsetof(TextFormatter, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "format_v2_text, compressed batches included (see v2_text_formatter).",
    .tp_traverse = textfmt_traverse,
    .tp_clear = textfmt_clear,
};

PyDoc_STRVAR(v2_text_formatter_doc,
"v2_text_formatter(decompress, limit, /)\n--\n\n"
"A callable ``f(batch, data, print_data)`` that is :func:`format_v2_text` for uncompressed\n"
"batches and also formats compressed ones (codecs 1-4): their records section is\n"
"``decompress(codec, payload, limit)`` (bytes; any Exception means None, the Python path).\n"
"``limit`` is an int, passed through (the most a batch may decompress to).");

static PyObject *
v2_text_formatter(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    TextFormatter *tf;
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "v2_text_formatter() takes 2 positional arguments but %zd were given", nargs);
        return NULL;
    }
    if (!PyCallable_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "v2_text_formatter(decompress, limit): a callable and an int");
        return NULL;
    }
    tf = PyObject_GC_New(TextFormatter, &TextFormatterType);
    if (tf == NULL)
        return NULL;
    tf->decompress = Py_NewRef(args[0]);
    tf->limit = Py_NewRef(args[1]);
    tf->vectorcall = textfmt_vectorcall;
    PyObject_GC_Track((PyObject *)tf);
    return (PyObject *)tf;
}

/* ==================================================================== columns
 *
 * decode_columns_v2(records, count, base_offset, base_timestamp, base_sequence,
 *                   log_append_time, include_headers, buffers, counts)
 * is RecordColumns.add_v2 (kafkatool/record/columns.py): it decodes `count` v2 records
 * from the whole of `records` exactly as decode_records(records, 0, len(records), count)
 * does (the same loop as decode() above, the same errors), but instead of building a
 * tuple per record it appends each field straight into the Arrow-layout bytearrays
 * `buffers` (the 17 of BUF_* below), and updates the list `counts` in place
 * [n, key nulls, value nulls, header-list nulls, headers, header-value nulls].
 * On any error every bytearray is put back as it was (truncated, and a bitmap's partial
 * last byte restored) and the caller keeps its old counts: the call is atomic. Buffers
 * grow with what is decoded, never with `count`.
 */

enum {
    BUF_OFFSETS, BUF_TIMESTAMPS, BUF_SEQUENCES,
    BUF_KEY_OFFSETS, BUF_KEY_DATA, BUF_KEY_VALIDITY,
    BUF_VALUE_OFFSETS, BUF_VALUE_DATA, BUF_VALUE_VALIDITY,
    BUF_HEADER_OFFSETS, BUF_HEADER_VALIDITY,
    BUF_HKEY_OFFSETS, BUF_HKEY_DATA, BUF_HKEY_VALIDITY,
    BUF_HVALUE_OFFSETS, BUF_HVALUE_DATA, BUF_HVALUE_VALIDITY,
    NBUF
};

/* One bytearray being appended to, in place: bytes are written past its size, into the
 * memory it has already allocated (CPython's bytearray keeps ob_alloc bytes, one of them for
 * a trailing NUL), and cols_finish() sets the size to `len`. So the capacity a bytearray
 * gained in one call serves the next (RecordColumns appends batch after batch): growth is
 * geometric over the whole chunk, not per call. cols_rollback() puts back `len0`, `last0`. */
struct gbuf {
    PyObject *ba;     /* borrowed */
    Py_ssize_t len0;  /* size before the call */
    Py_ssize_t len;   /* bytes written */
    Py_ssize_t cap;   /* bytes that may be written at p (allocated, bar the trailing NUL) */
    uint8_t *p;
    int last0;        /* last byte before the call (a bitmap's partial byte), -1 if empty */
};

/* What may be written at the start of `ba`: its allocation when its data starts at the
 * allocation (no `del b[:k]` offset: only then does a resize keep bytes past the size). */
static Py_ssize_t
gbuf_capacity(PyObject *ba)
{
    PyByteArrayObject *o = (PyByteArrayObject *)ba;
    if (o->ob_alloc > 0 && o->ob_start == o->ob_bytes)
        return o->ob_alloc - 1;
    return Py_SIZE(ba);
}

static int
gbuf_grow(struct gbuf *g, Py_ssize_t extra)
{
    Py_ssize_t need, size;
    if (extra > PY_SSIZE_T_MAX / 2 - g->len) {
        PyErr_NoMemory();
        return -1;
    }
    need = g->len + extra;
    size = g->cap + (g->cap >> 1) + 64;
    if (size < need)
        size = need;
    /* first the size over what is written (kept by any resize), then the room */
    if (PyByteArray_Resize(g->ba, g->len) < 0 || PyByteArray_Resize(g->ba, size) < 0)
        return -1;
    g->cap = gbuf_capacity(g->ba);
    g->p = (uint8_t *)PyByteArray_AS_STRING(g->ba);
    return 0;
}

#define RESERVE(g, extra) ((g)->len + (extra) <= (g)->cap ? 0 : gbuf_grow((g), (extra)))

static inline void
put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void
put_le64(uint8_t *p, uint64_t v)
{
    put_le32(p, (uint32_t)v);
    put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t
get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Append bit `i` (the bitmap holds i bits, the bits past them zero). */
static inline int
bit_append(struct gbuf *g, Py_ssize_t i, int set)
{
    if ((i & 7) == 0) {
        if (RESERVE(g, 1) < 0)
            return -1;
        g->p[g->len++] = 0;
    }
    if (set)
        g->p[i >> 3] |= (uint8_t)(1u << (i & 7));
    return 0;
}

static int
too_big(void)
{
    PyErr_SetString(PyExc_OverflowError,
        "RecordColumns: more than 2**31-1 data bytes in one column (Arrow int32 offsets); "
        "clear() first");
    return -1;
}

/* Append offsets entry `data->len` and validity bit `row` of a binary column. */
static inline int
bin_close(struct gbuf *off, struct gbuf *data, struct gbuf *val, Py_ssize_t row, int set)
{
    if (data->len > INT32_MAX)
        return too_big();
    if (RESERVE(off, 4) < 0)
        return -1;
    put_le32(off->p + off->len, (uint32_t)data->len);
    off->len += 4;
    return bit_append(val, row, set);
}

/* Append row `row` of a binary column: s[0:n], or null when n < 0. */
static inline int
bin_append(struct gbuf *off, struct gbuf *data, struct gbuf *val, Py_ssize_t row,
           const uint8_t *s, Py_ssize_t n)
{
    if (n > 0) {
        if (n > INT32_MAX - data->len)
            return too_big();
        if (RESERVE(data, n) < 0)
            return -1;
        memcpy(data->p + data->len, s, (size_t)n);
        data->len += n;
    }
    return bin_close(off, data, val, row, n >= 0);
}

static inline int
is_cont(uint8_t b)
{
    return (b & 0xC0) == 0x80;
}

/* Append s[0:n] as Java's new String(s, UTF_8).getBytes(UTF_8) gives it back: valid
 * UTF-8 as is, each malformed sequence U+FFFD. A port of JDK 17's String.decodeUTF8_UTF16
 * (columns.java_utf8 is the same port in Python). */
static int
java_utf8_append(struct gbuf *g, const uint8_t *s, Py_ssize_t sl)
{
    Py_ssize_t sp = 0;
    uint8_t *d;

    if (sl > (PY_SSIZE_T_MAX - g->len) / 3)
        return too_big();
    if (RESERVE(g, 3 * sl) < 0) /* a replacement (3 bytes) per input byte at most */
        return -1;
    d = g->p + g->len;
#define REPL() do { *d++ = 0xEF; *d++ = 0xBF; *d++ = 0xBD; } while (0)
    while (sp < sl) {
        uint8_t b1 = s[sp++];
        if (b1 < 0x80) {
            *d++ = b1;
        }
        else if (b1 >= 0xC2 && b1 <= 0xDF) {
            if (sp < sl) {
                if (!is_cont(s[sp]))
                    REPL(); /* s[sp] is read again */
                else {
                    *d++ = b1;
                    *d++ = s[sp++];
                }
                continue;
            }
            REPL();
            break;
        }
        else if (b1 >= 0xE0 && b1 <= 0xEF) {
            if (sp + 1 < sl) {
                uint8_t b2 = s[sp], b3 = s[sp + 1];
                int bad2 = (b1 == 0xE0 && (b2 & 0xE0) == 0x80) || !is_cont(b2);
                if (bad2 || !is_cont(b3)) {
                    REPL();
                    sp += bad2 ? 0 : 1; /* malformed3 */
                }
                else {
                    uint32_t c = (uint32_t)(b1 & 0x0F) << 12 | (uint32_t)(b2 & 0x3F) << 6 | (b3 & 0x3F);
                    if (c >= 0xD800 && c <= 0xDFFF)
                        REPL();
                    else {
                        *d++ = b1;
                        *d++ = b2;
                        *d++ = b3;
                    }
                    sp += 2;
                }
                continue;
            }
            if (sp < sl && ((b1 == 0xE0 && (s[sp] & 0xE0) == 0x80) || !is_cont(s[sp]))) {
                REPL();
                continue;
            }
            REPL(); /* a truncated sequence at the end: one replacement */
            break;
        }
        else if (b1 >= 0xF0 && b1 <= 0xF7) {
            if (sp + 2 < sl) {
                uint8_t b2 = s[sp], b3 = s[sp + 1], b4 = s[sp + 2];
                uint32_t uc = (uint32_t)(b1 & 0x07) << 18 | (uint32_t)(b2 & 0x3F) << 12
                              | (uint32_t)(b3 & 0x3F) << 6 | (b4 & 0x3F);
                if (!is_cont(b2) || !is_cont(b3) || !is_cont(b4) || uc < 0x10000 || uc > 0x10FFFF) {
                    REPL();
                    /* malformed4 */
                    if (b1 > 0xF4 || (b1 == 0xF0 && (b2 < 0x90 || b2 > 0xBF))
                        || (b1 == 0xF4 && (b2 & 0xF0) != 0x80) || !is_cont(b2))
                        ;
                    else if (!is_cont(b3))
                        sp += 1;
                    else
                        sp += 2;
                }
                else {
                    *d++ = b1;
                    *d++ = b2;
                    *d++ = b3;
                    *d++ = b4;
                    sp += 3;
                }
                continue;
            }
            if (b1 > 0xF4 || (sp < sl && ((b1 == 0xF0 && (s[sp] < 0x90 || s[sp] > 0xBF))
                                          || (b1 == 0xF4 && (s[sp] & 0xF0) != 0x80)
                                          || !is_cont(s[sp])))) {
                REPL();
                continue;
            }
            sp++;
            REPL();
            if (sp < sl && !is_cont(s[sp]))
                continue;
            break;
        }
        else {
            REPL();
        }
    }
#undef REPL
    g->len = d - g->p;
    return 0;
}

static void
cols_rollback(struct gbuf *g)
{
    PyObject *type, *val, *tb;
    int k;
    PyErr_Fetch(&type, &val, &tb);
    for (k = 0; k < NBUF; k++) {
        PyObject *ba = g[k].ba;
        if (PyByteArray_GET_SIZE(ba) != g[k].len0 && PyByteArray_Resize(ba, g[k].len0) < 0)
            PyErr_Clear(); /* shrinking: cannot fail in practice */
        if (PyByteArray_GET_SIZE(ba) != g[k].len0)
            continue;
        if (g[k].last0 >= 0)
            PyByteArray_AS_STRING(ba)[g[k].len0 - 1] = (char)g[k].last0;
        if (((PyByteArrayObject *)ba)->ob_alloc > g[k].len0)
            PyByteArray_AS_STRING(ba)[g[k].len0] = '\0'; /* the trailing NUL, maybe written over */
    }
    PyErr_Restore(type, val, tb);
}

static int
cols_finish(struct gbuf *g)
{
    int k;
    for (k = 0; k < NBUF; k++)
        if (PyByteArray_GET_SIZE(g[k].ba) != g[k].len && PyByteArray_Resize(g[k].ba, g[k].len) < 0)
            return -1;
    return 0;
}

static int
int64_arg(PyObject *obj, const char *name, int64_t *out)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "add_v2: %s must be int64", name);
        }
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

PyDoc_STRVAR(decode_columns_v2_doc,
"decode_columns_v2(records, count, base_offset, base_timestamp, base_sequence,\n"
"                  log_append_time, include_headers, buffers, counts, /)\n--\n\n"
"RecordColumns.add_v2 in C (kafkatool.record.columns): decode ``count`` v2 records\n"
"from the whole of ``records`` (errors as decode_records(records, 0, len(records),\n"
"count)) and append them to the 17 Arrow-layout bytearrays ``buffers``; ``counts`` is\n"
"the list [rows, key nulls, value nulls, header-list nulls, headers, header-value\n"
"nulls], updated in place on success. On an error the bytearrays and the counts are\n"
"left as they were.");

static PyObject *
decode_columns_v2(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    struct gbuf g[NBUF];
    Py_buffer view;
    const uint8_t *buf;
    Py_ssize_t buflen, end, count, i = 0, k, cnt[6], row, hrow;
    int64_t base_offset = 0, base_ts = 0, lat = 0, bseq64 = 0;
    int32_t bseq;
    int has_lat, with_headers;
    PyObject *bufs, *counts;
    (void)module;

    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError,
            "decode_columns_v2() takes 9 positional arguments but %zd were given", nargs);
        return NULL;
    }
    /* count: a negative one raises decode_records' error (at position 0) */
    {
        int overflow;
        long long v;
        if (!PyLong_Check(args[1])) {
            PyErr_SetString(PyExc_TypeError, "decode_columns_v2: count must be an int");
            return NULL;
        }
        v = PyLong_AsLongLongAndOverflow(args[1], &overflow);
        if (v == -1 && PyErr_Occurred())
            return NULL;
        if (overflow < 0 || (overflow == 0 && v < 0)) {
            PyObject *c = PyObject_Format(args[1], NULL), *msg;
            if (c == NULL)
                return NULL;
            msg = PyUnicode_FromFormat("Found invalid record count %U in magic v2 batch", c);
            Py_DECREF(c);
            if (msg == NULL)
                return NULL;
            raise_invalid_obj(msg, zero);
            set_error_kind(RECORD_COUNT_MISMATCH);
            Py_DECREF(msg);
            return NULL;
        }
        count = overflow > 0 || v > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : (Py_ssize_t)v;
    }
    if (int64_arg(args[2], "base_offset", &base_offset) < 0
        || int64_arg(args[3], "base_timestamp", &base_ts) < 0
        || int64_arg(args[4], "base_sequence", &bseq64) < 0)
        return NULL;
    if (bseq64 < INT32_MIN || bseq64 > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "add_v2: base_sequence must be int32");
        return NULL;
    }
    bseq = (int32_t)bseq64;
    has_lat = args[5] != Py_None;
    if (has_lat && int64_arg(args[5], "log_append_time", &lat) < 0)
        return NULL;
    if ((with_headers = PyObject_IsTrue(args[6])) < 0)
        return NULL;
    if (count == 0) /* as iter_batch_records: the bytes after a zero count are never read */
        Py_RETURN_NONE;
    bufs = args[7];
    counts = args[8];
    if (!PyTuple_Check(bufs) || PyTuple_GET_SIZE(bufs) != NBUF || !PyList_CheckExact(counts)
        || PyList_GET_SIZE(counts) != 6) {
        PyErr_SetString(PyExc_TypeError,
            "decode_columns_v2: buffers must be a tuple of 17 bytearrays, counts a list of 6 ints");
        return NULL;
    }
    for (k = 0; k < 6; k++) {
        cnt[k] = PyLong_AsSsize_t(PyList_GET_ITEM(counts, k));
        if (cnt[k] == -1 && PyErr_Occurred())
            return NULL;
        if (cnt[k] < 0 || cnt[k] > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "decode_columns_v2: counts out of range");
            return NULL;
        }
    }
    for (k = 0; k < NBUF; k++) {
        PyObject *ba = PyTuple_GET_ITEM(bufs, k);
        if (!PyByteArray_CheckExact(ba)) {
            PyErr_SetString(PyExc_TypeError, "decode_columns_v2: buffers must be bytearrays");
            return NULL;
        }
        if (((PyByteArrayObject *)ba)->ob_exports > 0) {
            PyErr_SetString(PyExc_BufferError,
                "RecordColumns: a buffer is still exported (viewed by Arrow or a memoryview) and "
                "cannot grow; clear() gives the columns new buffers");
            return NULL;
        }
        g[k].ba = ba;
        g[k].len0 = g[k].len = PyByteArray_GET_SIZE(ba);
        g[k].cap = gbuf_capacity(ba);
        g[k].p = (uint8_t *)PyByteArray_AS_STRING(ba);
        g[k].last0 = g[k].len0 > 0 ? g[k].p[g[k].len0 - 1] : -1;
    }
    /* The buffers must be what the counts say (RecordColumns keeps them so). */
    {
        Py_ssize_t n = cnt[0], hn = cnt[4];
        int ok = g[BUF_OFFSETS].len == 8 * n && g[BUF_TIMESTAMPS].len == 8 * n
            && g[BUF_SEQUENCES].len == 4 * n
            && g[BUF_KEY_OFFSETS].len == 4 * (n + 1) && g[BUF_VALUE_OFFSETS].len == 4 * (n + 1)
            && g[BUF_HEADER_OFFSETS].len == 4 * (n + 1)
            && g[BUF_KEY_VALIDITY].len == (n + 7) / 8 && g[BUF_VALUE_VALIDITY].len == (n + 7) / 8
            && g[BUF_HEADER_VALIDITY].len == (n + 7) / 8
            && g[BUF_HKEY_OFFSETS].len == 4 * (hn + 1) && g[BUF_HVALUE_OFFSETS].len == 4 * (hn + 1)
            && g[BUF_HKEY_VALIDITY].len == (hn + 7) / 8 && g[BUF_HVALUE_VALIDITY].len == (hn + 7) / 8;
        if (ok) {
            ok = get_le32(g[BUF_KEY_OFFSETS].p + 4 * n) == (uint32_t)g[BUF_KEY_DATA].len
                && get_le32(g[BUF_VALUE_OFFSETS].p + 4 * n) == (uint32_t)g[BUF_VALUE_DATA].len
                && get_le32(g[BUF_HEADER_OFFSETS].p + 4 * n) == (uint32_t)hn
                && get_le32(g[BUF_HKEY_OFFSETS].p + 4 * hn) == (uint32_t)g[BUF_HKEY_DATA].len
                && get_le32(g[BUF_HVALUE_OFFSETS].p + 4 * hn) == (uint32_t)g[BUF_HVALUE_DATA].len;
        }
        if (!ok) {
            PyErr_SetString(PyExc_ValueError,
                "decode_columns_v2: the buffers do not match the counts (RecordColumns modified by hand?)");
            return NULL;
        }
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    buf = (const uint8_t *)view.buf;
    buflen = end = view.len;
    row = cnt[0];
    hrow = cnt[4];
    /* Room for the fixed-width columns up front: `count` rows, but never more than the
     * bytes can hold (each record takes >= MIN_RECORD_SIZE), whatever `count` says. */
    {
        Py_ssize_t rows = end / MIN_RECORD_SIZE;
        if (rows > count)
            rows = count;
        if (RESERVE(&g[BUF_OFFSETS], 8 * rows) < 0 || RESERVE(&g[BUF_TIMESTAMPS], 8 * rows) < 0
            || RESERVE(&g[BUF_SEQUENCES], 4 * rows) < 0 || RESERVE(&g[BUF_KEY_OFFSETS], 4 * rows) < 0
            || RESERVE(&g[BUF_VALUE_OFFSETS], 4 * rows) < 0 || RESERVE(&g[BUF_HEADER_OFFSETS], 4 * rows) < 0
            || RESERVE(&g[BUF_KEY_VALIDITY], rows / 8 + 1) < 0 || RESERVE(&g[BUF_VALUE_VALIDITY], rows / 8 + 1) < 0
            || RESERVE(&g[BUF_HEADER_VALIDITY], rows / 8 + 1) < 0)
            goto fail;
    }

    for (k = 0; k < count; k++) {
        struct rec r;
        int s;
        int64_t seq;

        /* --- the record (decode(): final, no budget); an error rolls every buffer back */
        s = rec_frame(buf, i, end, &r);
        if (s == REC_OK)
            s = rec_fields(buf, buflen, &r);
        if (s != REC_OK) {
            rec_raise(&r, s);
            goto fail;
        }
        if (bin_append(&g[BUF_KEY_OFFSETS], &g[BUF_KEY_DATA], &g[BUF_KEY_VALIDITY], row,
                       buf + r.key, r.kl) < 0
            || bin_append(&g[BUF_VALUE_OFFSETS], &g[BUF_VALUE_DATA], &g[BUF_VALUE_VALIDITY], row,
                          buf + r.value, r.vl) < 0)
            goto fail;
        if ((s = rec_headers(buf, buflen, &r)) != REC_OK) {
            rec_raise(&r, s);
            goto fail;
        }
        i = r.body_end;
        if (r.hc != 0 && with_headers) {
            Py_ssize_t j = r.headers;
            int32_t h;
            for (h = 0; h < r.hc; h++) {
                Py_ssize_t hko, hvo;
                int32_t hkl = 0, hvl = 0;
                rec_header(buf, &j, r.body_end, &hko, &hkl, &hvo, &hvl);
                if (hrow >= INT32_MAX) { /* the int32 list offsets of the headers */
                    too_big();
                    goto fail;
                }
                if (java_utf8_append(&g[BUF_HKEY_DATA], buf + hko, hkl) < 0
                    || bin_close(&g[BUF_HKEY_OFFSETS], &g[BUF_HKEY_DATA], &g[BUF_HKEY_VALIDITY], hrow, 1) < 0
                    || bin_append(&g[BUF_HVALUE_OFFSETS], &g[BUF_HVALUE_DATA], &g[BUF_HVALUE_VALIDITY], hrow,
                                  buf + hvo, hvl) < 0)
                    goto fail;
                if (hvl < 0)
                    cnt[5]++;
                hrow++;
            }
        }

        /* --- the record's row */
        if (r.kl < 0)
            cnt[1]++;
        if (r.vl < 0)
            cnt[2]++;
        if (r.hc == 0 || !with_headers)
            cnt[3]++;
        if (RESERVE(&g[BUF_HEADER_OFFSETS], 4) < 0
            || bit_append(&g[BUF_HEADER_VALIDITY], row, r.hc != 0 && with_headers) < 0)
            goto fail;
        put_le32(g[BUF_HEADER_OFFSETS].p + g[BUF_HEADER_OFFSETS].len, (uint32_t)hrow);
        g[BUF_HEADER_OFFSETS].len += 4;
        if (row >= INT32_MAX) { /* the int32 list offsets of the headers */
            too_big();
            goto fail;
        }
        if (RESERVE(&g[BUF_OFFSETS], 8) < 0 || RESERVE(&g[BUF_TIMESTAMPS], 8) < 0
            || RESERVE(&g[BUF_SEQUENCES], 4) < 0)
            goto fail;
        put_le64(g[BUF_OFFSETS].p + g[BUF_OFFSETS].len, (uint64_t)base_offset + (uint64_t)(int64_t)r.od);
        g[BUF_OFFSETS].len += 8;
        put_le64(g[BUF_TIMESTAMPS].p + g[BUF_TIMESTAMPS].len,
                 has_lat ? (uint64_t)lat : (uint64_t)base_ts + (uint64_t)r.tsd);
        g[BUF_TIMESTAMPS].len += 8;
        /* Kafka's incrementSequence as increment_sequence computes it (no overflow in 64 bits) */
        if (bseq == -1)
            seq = -1;
        else if ((int64_t)r.od <= (int64_t)INT32_MAX - bseq)
            seq = (int64_t)bseq + r.od;
        else
            seq = (int64_t)r.od - ((int64_t)INT32_MAX - bseq) - 1;
        put_le32(g[BUF_SEQUENCES].p + g[BUF_SEQUENCES].len, (uint32_t)seq);
        g[BUF_SEQUENCES].len += 4;
        row++;
    }
    if (i != end) {
        raise_invalid(i, "Incorrect declared batch size, records still remaining in file");
        set_error_kind(RECORD_COUNT_MISMATCH);
        goto fail;
    }
    PyBuffer_Release(&view);
    cnt[0] = row;
    cnt[4] = hrow;
    {
        PyObject *vals[6];
        for (k = 0; k < 6; k++)
            if ((vals[k] = PyLong_FromSsize_t(cnt[k])) == NULL) {
                while (--k >= 0)
                    Py_DECREF(vals[k]);
                cols_rollback(g);
                return NULL;
            }
        if (cols_finish(g) < 0) {
            for (k = 0; k < 6; k++)
                Py_DECREF(vals[k]);
            cols_rollback(g);
            return NULL;
        }
        for (k = 0; k < 6; k++)
            PyList_SetItem(counts, k, vals[k]); /* steals; cannot fail (exact list, k < 6) */
    }
    Py_RETURN_NONE;

fail:
    PyBuffer_Release(&view);
    cols_rollback(g);
    return NULL;
}

/* ==================================================================== CRC-32C
 *
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the `crc32c` package's
 * function: crc32c(data, value) continues the finished CRC `value` over `data`.
 *
 * Two implementations, chosen once at module init:
 *   - x86-64 with SSE4.2 (GCC/clang, runtime check __builtin_cpu_supports): the
 *     crc32 instruction, 8 bytes at a time, in three independent streams over
 *     consecutive blocks that are then combined with "append n zero bytes"
 *     operators (tables built at init), as in Mark Adler's crc32c.c. The
 *     instruction has a latency of 3 cycles and a throughput of 1, so three
 *     streams keep it busy. Compiled with __attribute__((target("sse4.2"))): the
 *     rest of the module, and the build, need no -msse4.2.
 *   - everywhere else: portable slicing-by-8 tables.
 * Both work on the raw register (no pre/post inversion); the callers invert.
 *
 * Why its own CRC although the `crc32c` package is a dependency (issue 10 asked to drop it
 * unless the package costs more than 5%): bench/bench_crc.py runs these loops with every CRC
 * replaced by a call of crc32c.crc32c per batch. Measured 2026-11-25 (32 MiB segments, CPU
 * seconds, best of 7, two runs), library / own: one-record batches 2.1-2.5x in verify's scan
 * and 1.39-1.42x in walk_v2 (the call costs more than the CRC of a ~400-byte batch, and three
 * batches cannot be interleaved through it); 16 KiB batches 1.07-1.11x in the scan and 1.31x
 * in walk_v2 (0.85x before walk_v2 CRC'd three batches at once). So it stays.
 */

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc32c_table[8][256]; /* slicing-by-8 */

static void
crc32c_init_tables(void)
{
    uint32_t n, crc, k;
    for (n = 0; n < 256; n++) {
        crc = n;
        for (k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ CRC32C_POLY : crc >> 1;
        crc32c_table[0][n] = crc;
    }
    for (n = 0; n < 256; n++) {
        crc = crc32c_table[0][n];
        for (k = 1; k < 8; k++) {
            crc = crc32c_table[0][crc & 0xff] ^ (crc >> 8);
            crc32c_table[k][n] = crc;
        }
    }
}

static inline uint64_t
load_le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Portable: raw register in, raw register out. */
static uint32_t
crc32c_sw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t crc64 = crc;
    while (len && ((uintptr_t)p & 7) != 0) {
        crc64 = crc32c_table[0][(crc64 ^ *p++) & 0xff] ^ (crc64 >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t w = load_le64(p) ^ crc64;
        crc64 = crc32c_table[7][w & 0xff] ^
                crc32c_table[6][(w >> 8) & 0xff] ^
                crc32c_table[5][(w >> 16) & 0xff] ^
                crc32c_table[4][(w >> 24) & 0xff] ^
                crc32c_table[3][(w >> 32) & 0xff] ^
                crc32c_table[2][(w >> 40) & 0xff] ^
                crc32c_table[1][(w >> 48) & 0xff] ^
                crc32c_table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len) {
        crc64 = crc32c_table[0][(crc64 ^ *p++) & 0xff] ^ (crc64 >> 8);
        len--;
    }
    return (uint32_t)crc64;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC32C_HAVE_HW 1
#include <nmmintrin.h>

/* Block sizes of the three-stream loops (bytes per stream). */
#define CRC32C_LONG 4096
#define CRC32C_SHORT 256

static uint32_t crc32c_long_shift[4][256];  /* append CRC32C_LONG zero bytes */
static uint32_t crc32c_short_shift[4][256]; /* append CRC32C_SHORT zero bytes */

/* GF(2) 32x32 matrix times vector (Adler). */
static uint32_t
gf2_matrix_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1)
            sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void
gf2_matrix_square(uint32_t *square, const uint32_t *mat)
{
    int n;
    for (n = 0; n < 32; n++)
        square[n] = gf2_matrix_times(mat, mat[n]);
}

/* The operator that appends `len` zero bytes (len a power of two) to a raw CRC. */
static void
crc32c_zeros_op(uint32_t *even, size_t len)
{
    uint32_t odd[32], row = 1;
    int n;

    odd[0] = CRC32C_POLY; /* one zero bit */
    for (n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_matrix_square(even, odd); /* 2 bits */
    gf2_matrix_square(odd, even); /* 4 bits */
    /* 8 bits = one byte, then keep squaring until len bytes */
    do {
        gf2_matrix_square(even, odd);
        len >>= 1;
        if (len == 0)
            return;
        gf2_matrix_square(odd, even);
        len >>= 1;
    } while (len);
    for (n = 0; n < 32; n++)
        even[n] = odd[n];
}

static void
crc32c_zeros(uint32_t zeros[][256], size_t len)
{
    uint32_t op[32], n;
    crc32c_zeros_op(op, len);
    for (n = 0; n < 256; n++) {
        zeros[0][n] = gf2_matrix_times(op, n);
        zeros[1][n] = gf2_matrix_times(op, n << 8);
        zeros[2][n] = gf2_matrix_times(op, n << 16);
        zeros[3][n] = gf2_matrix_times(op, n << 24);
    }
}

static inline uint32_t
crc32c_shift(uint32_t zeros[][256], uint32_t crc)
{
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^
           zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t
crc32c_hw(uint32_t crc, const uint8_t *next, size_t len)
{
    uint64_t crc0 = crc, crc1, crc2;
    const uint8_t *end;

    while (len && ((uintptr_t)next & 7) != 0) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        len--;
    }
    while (len >= CRC32C_LONG * 3) {
        crc1 = crc2 = 0;
        end = next + CRC32C_LONG;
        do {
            crc0 = _mm_crc32_u64(crc0, load_le64(next));
            crc1 = _mm_crc32_u64(crc1, load_le64(next + CRC32C_LONG));
            crc2 = _mm_crc32_u64(crc2, load_le64(next + 2 * CRC32C_LONG));
            next += 8;
        } while (next < end);
        crc0 = crc32c_shift(crc32c_long_shift, (uint32_t)crc0) ^ crc1;
        crc0 = crc32c_shift(crc32c_long_shift, (uint32_t)crc0) ^ crc2;
        next += 2 * CRC32C_LONG;
        len -= 3 * CRC32C_LONG;
    }
    while (len >= CRC32C_SHORT * 3) {
        crc1 = crc2 = 0;
        end = next + CRC32C_SHORT;
        do {
            crc0 = _mm_crc32_u64(crc0, load_le64(next));
            crc1 = _mm_crc32_u64(crc1, load_le64(next + CRC32C_SHORT));
            crc2 = _mm_crc32_u64(crc2, load_le64(next + 2 * CRC32C_SHORT));
            next += 8;
        } while (next < end);
        crc0 = crc32c_shift(crc32c_short_shift, (uint32_t)crc0) ^ crc1;
        crc0 = crc32c_shift(crc32c_short_shift, (uint32_t)crc0) ^ crc2;
        next += 2 * CRC32C_SHORT;
        len -= 3 * CRC32C_SHORT;
    }
    end = next + (len - (len & 7));
    while (next < end) {
        crc0 = _mm_crc32_u64(crc0, load_le64(next));
        next += 8;
    }
    len &= 7;
    while (len) {
        crc0 = _mm_crc32_u8((uint32_t)crc0, *next++);
        len--;
    }
    return (uint32_t)crc0;
}

/* Finished CRC-32C of three independent buffers at once: their common length runs as
 * three interleaved dependency chains (the crc32 instruction has a latency of three
 * cycles and a throughput of one), the rest of each through crc32c_hw. Small batches
 * are too short for crc32c_hw's own three-way split, so this is what keeps a walk of
 * one-record batches near memory speed. */
__attribute__((target("sse4.2"))) static void
crc32c_hw_x3(const uint8_t *const p[3], const size_t len[3], uint32_t out[3])
{
    uint64_t c0 = 0xFFFFFFFFu, c1 = 0xFFFFFFFFu, c2 = 0xFFFFFFFFu;
    size_t n = len[0], i;
    if (len[1] < n)
        n = len[1];
    if (len[2] < n)
        n = len[2];
    n &= ~(size_t)7;
    for (i = 0; i < n; i += 8) {
        c0 = _mm_crc32_u64(c0, load_le64(p[0] + i));
        c1 = _mm_crc32_u64(c1, load_le64(p[1] + i));
        c2 = _mm_crc32_u64(c2, load_le64(p[2] + i));
    }
    out[0] = crc32c_hw((uint32_t)c0, p[0] + n, len[0] - n) ^ 0xFFFFFFFFu;
    out[1] = crc32c_hw((uint32_t)c1, p[1] + n, len[1] - n) ^ 0xFFFFFFFFu;
    out[2] = crc32c_hw((uint32_t)c2, p[2] + n, len[2] - n) ^ 0xFFFFFFFFu;
}
#endif /* x86-64 GCC/clang */

/* The implementation in use (raw register in/out), set by crc32c_setup(). */
static uint32_t (*crc32c_raw)(uint32_t, const uint8_t *, size_t) = crc32c_sw;
static int crc32c_hardware = 0;

static void
crc32c_setup(void)
{
    crc32c_init_tables();
#ifdef CRC32C_HAVE_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc32c_zeros(crc32c_long_shift, CRC32C_LONG);
        crc32c_zeros(crc32c_short_shift, CRC32C_SHORT);
        crc32c_raw = crc32c_hw;
        crc32c_hardware = 1;
    }
#endif
}

/* Finished CRC-32C of [p, p+len) continuing from the finished CRC `value`. */
static inline uint32_t
crc32c_update(uint32_t value, const uint8_t *p, size_t len)
{
    return crc32c_raw(value ^ 0xFFFFFFFFu, p, len) ^ 0xFFFFFFFFu;
}

/* Finished CRC-32C of each of three buffers. */
static void
crc32c_three(const uint8_t *const p[3], const size_t len[3], uint32_t out[3])
{
#ifdef CRC32C_HAVE_HW
    if (crc32c_hardware) {
        crc32c_hw_x3(p, len, out);
        return;
    }
#endif
    out[0] = crc32c_update(0, p[0], len[0]);
    out[1] = crc32c_update(0, p[1], len[1]);
    out[2] = crc32c_update(0, p[2], len[2]);
}

/* Parse (data, value=0) for crc32c()/_crc32c_portable(). */
static int
crc32c_args(const char *name, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
            Py_buffer *view, uint32_t *value)
{
    PyObject *slots[2] = {NULL, NULL};
    static const char *const names[2] = {"data", "value"};
    Py_ssize_t j, nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    int a;

    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most 2 positional arguments (%zd given)",
                     name, nargs);
        return -1;
    }
    for (a = 0; a < nargs; a++)
        slots[a] = args[a];
    for (j = 0; j < nkw; j++) {
        PyObject *kw = PyTuple_GET_ITEM(kwnames, j);
        for (a = 0; a < 2; a++)
            if (PyUnicode_CompareWithASCIIString(kw, names[a]) == 0)
                break;
        if (a == 2) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'", name, kw);
            return -1;
        }
        if (slots[a] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                         name, names[a]);
            return -1;
        }
        slots[a] = args[nargs + j];
    }
    if (slots[0] == NULL) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument 'data'", name);
        return -1;
    }
    *value = 0;
    if (slots[1] != NULL) {
        /* as the crc32c package ("I" format): any int, masked to 32 bits */
        PyObject *idx = PyNumber_Index(slots[1]);
        unsigned long long v;
        if (idx == NULL)
            return -1;
        v = PyLong_AsUnsignedLongLongMask(idx);
        Py_DECREF(idx);
        if (v == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        *value = (uint32_t)v;
    }
    if (PyUnicode_Check(slots[0])) {
        PyErr_Format(PyExc_TypeError, "a bytes-like object is required, not '%.100s'",
                     Py_TYPE(slots[0])->tp_name);
        return -1;
    }
    return PyObject_GetBuffer(slots[0], view, PyBUF_SIMPLE);
}

/* Release the GIL for long inputs, as the crc32c package does. */
#define CRC32C_GIL_RELEASE_MIN 32768

PyDoc_STRVAR(crc32c_doc,
"crc32c(data, value=0)\n--\n\n"
"CRC-32C (Castagnoli) of ``data`` continuing from the CRC ``value``; unsigned.\n"
"Same results as ``crc32c.crc32c`` (``value`` is masked to 32 bits).");

static PyObject *
py_crc32c(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_buffer view;
    uint32_t value, crc;

    if (crc32c_args("crc32c", args, nargs, kwnames, &view, &value) < 0)
        return NULL;
    if (view.len >= CRC32C_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32c_update(value, (const uint8_t *)view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    }
    else
        crc = crc32c_update(value, (const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

PyDoc_STRVAR(crc32c_portable_doc,
"_crc32c_portable(data, value=0)\n--\n\n"
"crc32c() through the portable table-driven code, whatever the CPU (for tests).");

static PyObject *
py_crc32c_portable(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_buffer view;
    uint32_t value, crc;

    if (crc32c_args("_crc32c_portable", args, nargs, kwnames, &view, &value) < 0)
        return NULL;
    crc = crc32c_sw(value ^ 0xFFFFFFFFu, (const uint8_t *)view.buf, (size_t)view.len) ^ 0xFFFFFFFFu;
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* ==================================================================== walk_v2 */

#define WALK_NEED_MORE 0  /* tail / end of window: the caller refills or stops */
#define WALK_BAD_SIZE 2   /* size < 14 */
#define WALK_LEGACY 3     /* magic < 2 (0, 1 or negative): the caller decodes it */
#define WALK_SHORT_V2 4   /* v2 entry shorter than its 61-byte header */

#define WALK_HEADER_UP_TO_MAGIC 17
#define WALK_LOG_OVERHEAD 12
#define WALK_MIN_SIZE 14
#define WALK_V2_HEADER 61
#define WALK_NFIELDS 15

static inline int64_t
be64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline uint32_t
be32u(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline int32_t
be32(const uint8_t *p)
{
    return (int32_t)be32u(p);
}

static inline uint16_t
be16u(const uint8_t *p)
{
    return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

/* One Batch (a tuple subtype) for the v2 entry of `total` bytes at p.
 *
 * Built as tuple's own subtype constructor does (tp_alloc, then the items). When
 * the type has no instance __dict__, the instance holds nothing but ints and can
 * never be part of a cycle, so it is untracked by the GC, as CPython untracks
 * exact tuples of atomic items: walking 700 k batches then triggers no full
 * traversals of the growing result (a third of the run time otherwise). Equal
 * stored/computed CRCs and equal base/max timestamps share one int object. */
static PyObject *
make_batch_crc(PyTypeObject *batch_type, const uint8_t *p, long long position, Py_ssize_t total, uint32_t computed)
{
    PyObject *b, *item;
    int i;
    uint32_t stored = be32u(p + 17);
    int64_t base_ts = be64(p + 27), max_ts = be64(p + 35);

    b = batch_type->tp_alloc(batch_type, WALK_NFIELDS);
    if (b == NULL)
        return NULL;
    for (i = 0; i < WALK_NFIELDS; i++) {
        switch (i) {
        case 0: item = PyLong_FromLongLong(position); break;
        case 1: item = PyLong_FromSsize_t(total); break;
        case 2: item = PyLong_FromLongLong(be64(p)); break;                  /* baseOffset */
        case 3: item = PyLong_FromLong((int8_t)p[16]); break;                /* magic */
        case 4: item = PyLong_FromUnsignedLong(stored); break;               /* stored crc */
        case 5: item = PyLong_FromLong(be16u(p + 21)); break;                /* attributes & 0xFFFF */
        case 6: item = PyLong_FromLong(be32(p + 23)); break;                 /* lastOffsetDelta */
        case 7: item = PyLong_FromLongLong(base_ts); break;                  /* baseTimestamp */
        case 8:                                                              /* maxTimestamp */
            if (max_ts == base_ts) {
                item = PyTuple_GET_ITEM(b, 7);
                Py_INCREF(item);
            }
            else
                item = PyLong_FromLongLong(max_ts);
            break;
        case 9: item = PyLong_FromLongLong(be64(p + 43)); break;             /* producerId */
        case 10: item = PyLong_FromLong((int16_t)be16u(p + 51)); break;      /* producerEpoch */
        case 11: item = PyLong_FromLong(be32(p + 53)); break;                /* baseSequence */
        case 12: item = PyLong_FromLong(be32(p + 57)); break;                /* recordsCount */
        case 13: item = PyLong_FromLong(be32(p + 12)); break;                /* partitionLeaderEpoch */
        default:                                                             /* computed crc */
            if (computed == stored) {
                item = PyTuple_GET_ITEM(b, 4);
                Py_INCREF(item);
            }
            else
                item = PyLong_FromUnsignedLong(computed);
            break;
        }
        if (item == NULL) {
            Py_DECREF(b); /* unset items are NULL, which tuple dealloc skips */
            return NULL;
        }
        PyTuple_SET_ITEM(b, i, item);
    }
    if (batch_type->tp_dictoffset == 0 && PyObject_GC_IsTracked(b))
        PyObject_GC_UnTrack(b);
    return b;
}

/* make_batch_crc with the CRC-32C computed here. */
static PyObject *
make_batch(PyTypeObject *batch_type, const uint8_t *p, long long position, Py_ssize_t total)
{
    return make_batch_crc(batch_type, p, position, total, crc32c_update(0, p + 21, (size_t)(total - 21)));
}

/* The one framing of the compiled loops (defined below, with the scans that share it):
 * up to three complete v2 entries ahead with their CRCs, and why there is none. They follow
 * kafkatool.record.framing.frame_entry (tests/test_framing.py holds them to it). */
static int frame_v2(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, const uint8_t *ent[3], Py_ssize_t tot[3],
                    uint32_t computed[3]);
static int walk_stop_status(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end);

PyDoc_STRVAR(walk_v2_doc,
"walk_v2(buf, pos, end, file_position, batch_type)\n--\n\n"
"Walk the complete v2 batches of ``buf[pos:end]`` (spec §3, §4.1) in one call.\n\n"
"Returns ``(batches, next_pos, status)``: ``batches`` is a list of\n"
"``batch_type`` instances (a 15-field tuple subtype: position, size, offset,\n"
"magic, crc, attributes, last_offset_delta, base_timestamp, max_timestamp,\n"
"producer_id, producer_epoch, base_sequence, count, partition_leader_epoch,\n"
"computed_crc), positions being ``file_position + (p - pos)``; ``next_pos`` is\n"
"the buffer index where the walk stopped. ``status``: 0 the window holds no\n"
"further complete entry (at most 17 bytes left, or the entry runs past ``end``,\n"
"or exactly at ``end``), 2 size < 14, 3 a legacy entry (magic 0, 1 or\n"
"negative), 4 a v2 entry shorter than 61 bytes. Bytes outside\n"
"``[pos, end)`` are never read.");

static PyObject *
walk_v2(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t pos, end, p;
    long long file_position;
    PyTypeObject *batch_type;
    PyObject *list, *result;
    const uint8_t *buf;
    int status = WALK_NEED_MORE, overflow;

    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "walk_v2() takes exactly 5 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyType_Check(args[4]) || !PyType_IsSubtype((PyTypeObject *)args[4], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "walk_v2(): batch_type must be a subtype of tuple");
        return NULL;
    }
    batch_type = (PyTypeObject *)args[4];
    if (as_index(args[1], &pos) < 0 || as_index(args[2], &end) < 0)
        return NULL;
    {
        PyObject *idx = PyNumber_Index(args[3]);
        if (idx == NULL)
            return NULL;
        file_position = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
        if (file_position == -1 && PyErr_Occurred())
            return NULL;
        if (overflow != 0) {
            PyErr_SetString(PyExc_OverflowError, "walk_v2(): file_position out of range");
            return NULL;
        }
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (pos < 0 || pos > end || end > view.len) {
        PyErr_Format(PyExc_ValueError,
            "walk_v2: need 0 <= pos (%zd) <= end (%zd) <= len(buf) (%zd)", pos, end, view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    if (file_position > LLONG_MAX - (end - pos)) {
        PyErr_SetString(PyExc_OverflowError, "walk_v2(): file_position out of range");
        PyBuffer_Release(&view);
        return NULL;
    }
    list = PyList_New(0);
    if (list == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    buf = (const uint8_t *)view.buf;
    p = pos;
    for (;;) {
        /* frame up to three complete v2 entries ahead and CRC them together (§3 step 1: a
         * tail of <= 17 bytes is never parsed; status 0 means "refill, or the file's tail") */
        const uint8_t *ent[3];
        uint32_t computed[3];
        Py_ssize_t tot[3];
        int n = frame_v2(buf, p, end, ent, tot, computed), i;

        if (n == 0) {
            status = walk_stop_status(buf, p, end);
            break;
        }
        for (i = 0; i < n; i++) {
            PyObject *batch = make_batch_crc(batch_type, ent[i], file_position + (p - pos), tot[i], computed[i]);
            if (batch == NULL || PyList_Append(list, batch) < 0) {
                Py_XDECREF(batch);
                Py_DECREF(list);
                PyBuffer_Release(&view);
                return NULL;
            }
            Py_DECREF(batch);
            p += tot[i];
        }
    }
    PyBuffer_Release(&view);
    result = Py_BuildValue("(Nni)", list, p, status);
    return result; /* "N" steals list, also on failure */
}

/* ==================================================================== scan_v2 */

/* Attributes of the state object the scans read and update (kafkatool.verify.batches.ScanState). */
enum {
    SCAN_PREV_LAST,      /* int | None: last offset of the previous batch of the partition */
    SCAN_BASE,           /* int | None: the segment's base offset (None: not known) */
    SCAN_GOOD,           /* int: batches with a valid CRC */
    SCAN_MAX_TS,         /* int: largest maxTimestamp so far (-1 before any) */
    SCAN_FIRST,          /* int | None: first offset of the segment's first batch */
    SCAN_FIRST_LAST,     /* int | None: last offset of that batch */
    SCAN_EPOCHS,         /* dict: leader epoch -> first offset seen with it */
    SCAN_WANT_POS,       /* buffer of sorted native int64: positions the .index names */
    SCAN_POS_CURSOR,     /* int: entries of SCAN_WANT_POS below the next batch's position */
    SCAN_AT_POSITION,    /* dict: wanted position -> last offset of the batch there */
    SCAN_WANT_OFF,       /* buffer of sorted native int64: offsets the indexes name */
    SCAN_OFF_CURSOR,     /* int: entries of SCAN_WANT_OFF already passed */
    SCAN_BY_LAST,        /* dict: wanted batch last offset -> (position, max timestamp so far) */
    SCAN_CONTAINING,     /* dict: wanted offset inside a batch -> (position, last offset, max ts) */
    SCAN_BATCHES,        /* int: batches walked */
    SCAN_NSLOTS
};

/* The attribute names, in the order above; interned on the first call (scan_names()). */
static const char *const scan_attr_names[SCAN_NSLOTS] = {
    "prev_last", "base", "good", "max_ts", "first_offset", "first_last", "epochs", "want_positions",
    "position_cursor", "at_position", "want_offsets", "offset_cursor", "by_last_offset", "containing", "batches",
};
static PyObject *scan_attrs[SCAN_NSLOTS];

#define SCAN_INT32_MAX 2147483647LL

/* The state object, unpacked for the duration of one call (the dicts are owned references). */
struct scan_state {
    int64_t prev, base, first_off, first_last, good, max_ts, batches, last_epoch;
    int have_prev, have_base, have_first, set_first, healthy;
    Py_ssize_t pcur, wcur, npos, noff;
    const int64_t *wpos, *woff;
    Py_buffer wpos_view, woff_view;
    PyObject *epochs, *at_position, *by_last, *containing;
};

/* dict[key] = value for int64 keys; value built by the caller (stolen). */
static int
scan_dict_set(PyObject *dict, int64_t key, PyObject *value)
{
    PyObject *k;
    int rc;
    if (value == NULL)
        return -1;
    k = PyLong_FromLongLong(key);
    if (k == NULL) {
        Py_DECREF(value);
        return -1;
    }
    rc = PyDict_SetItem(dict, k, value);
    Py_DECREF(k);
    Py_DECREF(value);
    return rc;
}

static int
scan_contains(const int64_t *arr, Py_ssize_t n, int64_t v)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (arr[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && arr[lo] == v;
}

/* Intern the attribute names once. */
static int
scan_names(void)
{
    int i;
    for (i = 0; i < SCAN_NSLOTS; i++)
        if (scan_attrs[i] == NULL && (scan_attrs[i] = PyUnicode_InternFromString(scan_attr_names[i])) == NULL)
            return -1;
    return 0;
}

/* An int attribute, None allowed when `present` is not NULL (then 0 with *present = 0).
 * Clamped to int64 as scan_get_opt does: an offset out of range only makes a batch look
 * unhealthy, and Python then checks it exactly. */
static int
scan_attr_int(PyObject *st, int slot, int64_t *value, int *present)
{
    PyObject *o = PyObject_GetAttr(st, scan_attrs[slot]);
    int overflow;
    long long v;
    if (o == NULL)
        return -1;
    if (o == Py_None && present != NULL) {
        Py_DECREF(o);
        *present = 0;
        *value = 0;
        return 0;
    }
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    Py_DECREF(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (present != NULL)
        *present = 1;
    *value = overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : (int64_t)v;
    return 0;
}

/* A dict attribute (a new reference in *out). */
static int
scan_attr_dict(PyObject *st, int slot, PyObject **out)
{
    *out = PyObject_GetAttr(st, scan_attrs[slot]);
    if (*out == NULL)
        return -1;
    if (!PyDict_Check(*out)) {
        PyErr_Format(PyExc_TypeError, "state.%s must be a dict", scan_attr_names[slot]);
        return -1;
    }
    return 0;
}

/* state.<slot> = value (stolen). */
static int
scan_attr_set(PyObject *st, int slot, PyObject *value)
{
    int rc;
    if (value == NULL)
        return -1;
    rc = PyObject_SetAttr(st, scan_attrs[slot], value);
    Py_DECREF(value);
    return rc;
}

/* A sorted int64 array from an optional buffer attribute (None: empty). */
static int
scan_array(PyObject *st, int slot, Py_buffer *view, const int64_t **arr, Py_ssize_t *n)
{
    PyObject *o = PyObject_GetAttr(st, scan_attrs[slot]);
    int rc = 0;
    view->obj = NULL;
    *arr = NULL;
    *n = 0;
    if (o == NULL)
        return -1;
    if (o != Py_None) {
        if (PyObject_GetBuffer(o, view, PyBUF_SIMPLE) < 0)
            rc = -1;
        else {
            *arr = (const int64_t *)view->buf;
            *n = view->len / (Py_ssize_t)sizeof(int64_t);
        }
    }
    Py_DECREF(o);  /* the view holds its own reference */
    return rc;
}

static void
scan_release(struct scan_state *s)
{
    if (s->wpos_view.obj != NULL)
        PyBuffer_Release(&s->wpos_view);
    if (s->woff_view.obj != NULL)
        PyBuffer_Release(&s->woff_view);
    Py_CLEAR(s->epochs);
    Py_CLEAR(s->at_position);
    Py_CLEAR(s->by_last);
    Py_CLEAR(s->containing);
}

/* Read the state object; scan_release() afterwards, also on failure. */
static int
scan_begin(PyObject *st, struct scan_state *s)
{
    memset(s, 0, sizeof(*s));
    s->last_epoch = -1;
    if (scan_names() < 0 ||
        scan_attr_dict(st, SCAN_EPOCHS, &s->epochs) < 0 ||
        scan_attr_dict(st, SCAN_AT_POSITION, &s->at_position) < 0 ||
        scan_attr_dict(st, SCAN_BY_LAST, &s->by_last) < 0 ||
        scan_attr_dict(st, SCAN_CONTAINING, &s->containing) < 0)
        return -1;
    {
        int64_t pcur, wcur;
        if (scan_attr_int(st, SCAN_PREV_LAST, &s->prev, &s->have_prev) < 0 ||
            scan_attr_int(st, SCAN_BASE, &s->base, &s->have_base) < 0 ||
            scan_attr_int(st, SCAN_FIRST, &s->first_off, &s->have_first) < 0 ||
            scan_attr_int(st, SCAN_GOOD, &s->good, NULL) < 0 ||
            scan_attr_int(st, SCAN_MAX_TS, &s->max_ts, NULL) < 0 ||
            scan_attr_int(st, SCAN_BATCHES, &s->batches, NULL) < 0 ||
            scan_attr_int(st, SCAN_POS_CURSOR, &pcur, NULL) < 0 ||
            scan_attr_int(st, SCAN_OFF_CURSOR, &wcur, NULL) < 0)
            return -1;
        if (scan_array(st, SCAN_WANT_POS, &s->wpos_view, &s->wpos, &s->npos) < 0 ||
            scan_array(st, SCAN_WANT_OFF, &s->woff_view, &s->woff, &s->noff) < 0)
            return -1;
        if (pcur < 0 || pcur > s->npos || wcur < 0 || wcur > s->noff) {
            PyErr_SetString(PyExc_ValueError, "state cursor out of range");
            return -1;
        }
        s->pcur = (Py_ssize_t)pcur;
        s->wcur = (Py_ssize_t)wcur;
    }
    return 0;
}

/* Write back what the scan changed. */
static int
scan_end(PyObject *st, struct scan_state *s)
{
    if ((s->healthy && scan_attr_set(st, SCAN_PREV_LAST, PyLong_FromLongLong(s->prev)) < 0) ||
        (s->set_first && (scan_attr_set(st, SCAN_FIRST, PyLong_FromLongLong(s->first_off)) < 0 ||
                          scan_attr_set(st, SCAN_FIRST_LAST, PyLong_FromLongLong(s->first_last)) < 0)) ||
        scan_attr_set(st, SCAN_GOOD, PyLong_FromLongLong(s->good)) < 0 ||
        scan_attr_set(st, SCAN_MAX_TS, PyLong_FromLongLong(s->max_ts)) < 0 ||
        scan_attr_set(st, SCAN_BATCHES, PyLong_FromLongLong(s->batches)) < 0 ||
        scan_attr_set(st, SCAN_POS_CURSOR, PyLong_FromSsize_t(s->pcur)) < 0 ||
        scan_attr_set(st, SCAN_OFF_CURSOR, PyLong_FromSsize_t(s->wcur)) < 0)
        return -1;
    return 0;
}

/* The state updates of one healthy batch (verify's fast path). */
static int
scan_healthy(struct scan_state *s, int64_t position, int64_t first, int64_t lo, int64_t mts, int32_t ple)
{
    if (ple >= 0 && ple != s->last_epoch) {
        PyObject *k = PyLong_FromLong(ple);
        int has;
        if (k == NULL)
            return -1;
        has = PyDict_Contains(s->epochs, k);
        if (has == 0) {
            PyObject *v = PyLong_FromLongLong(first);
            has = v == NULL ? -1 : PyDict_SetItem(s->epochs, k, v);
            Py_XDECREF(v);
        }
        Py_DECREF(k);
        if (has < 0)
            return -1;
        s->last_epoch = ple;
    }
    s->prev = lo;
    s->have_prev = 1;
    s->healthy = 1;
    if (!s->have_first) {
        s->first_off = first;
        s->first_last = lo;
        s->have_first = s->set_first = 1;
    }
    s->good++;
    if (mts > s->max_ts)
        s->max_ts = mts;
    while (s->pcur < s->npos && s->wpos[s->pcur] < position)
        s->pcur++;
    if (s->pcur < s->npos && s->wpos[s->pcur] == position &&
        scan_dict_set(s->at_position, position, PyLong_FromLongLong(lo)) < 0)
        return -1;
    if (s->noff) {
        const int64_t *woff = s->woff;
        /* the cursor only moves forward; a wanted offset behind it (after an offset
         * anomaly checked in Python) is looked up instead */
        if (s->wcur > 0 && woff[s->wcur - 1] >= lo && scan_contains(woff, s->noff, lo) &&
            scan_dict_set(s->by_last, lo, Py_BuildValue("(LL)", (long long)position, (long long)s->max_ts)) < 0)
            return -1;
        while (s->wcur < s->noff && woff[s->wcur] < first)
            s->wcur++;
        while (s->wcur < s->noff && woff[s->wcur] <= lo) {
            int64_t w = woff[s->wcur];
            if (w == lo) {
                if (scan_dict_set(s->by_last, lo, Py_BuildValue("(LL)", (long long)position, (long long)s->max_ts)) < 0)
                    return -1;
            }
            else if (scan_dict_set(s->containing, w, Py_BuildValue("(LLL)", (long long)position, (long long)lo, (long long)s->max_ts)) < 0)
                return -1;
            s->wcur++;
        }
    }
    s->batches++;
    return 0;
}

/* Append the batch at `e` to `list` for Python (a run_fn ends its walk after it). */
static int
hand_to_python(PyObject *list, PyTypeObject *batch_type, const uint8_t *e, int64_t position, Py_ssize_t total)
{
    PyObject *batch = make_batch(batch_type, e, position, total);
    int rc = batch == NULL ? -1 : PyList_Append(list, batch);
    Py_XDECREF(batch);
    return rc;
}

/* Up to three complete v2 entries of buf[p:end], back to back: their starts, total sizes
 * and computed CRC-32Cs (three interleaved when there are three). Returns how many. */
static int
frame_v2(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end, const uint8_t *ent[3], Py_ssize_t tot[3], uint32_t computed[3])
{
    size_t crc_len[3];
    Py_ssize_t q = p;
    int n = 0, i;

    while (n < 3 && end - q > WALK_HEADER_UP_TO_MAGIC) {
        int32_t sz = be32(buf + q + 8);
        Py_ssize_t t = (Py_ssize_t)sz + WALK_LOG_OVERHEAD;
        if (sz < WALK_MIN_SIZE || t > end - q || (int8_t)buf[q + 16] < 2 || t < WALK_V2_HEADER)
            break;
        ent[n] = buf + q;
        tot[n] = t;
        crc_len[n] = (size_t)(t - 21);
        q += t;
        n++;
    }
    if (n == 3) {
        const uint8_t *starts[3] = {ent[0] + 21, ent[1] + 21, ent[2] + 21};
        crc32c_three(starts, crc_len, computed);
    }
    else
        for (i = 0; i < n; i++)
            computed[i] = crc32c_update(0, ent[i] + 21, crc_len[i]);
    return n;
}

/* Why the walk cannot go on at buf[p] (no complete v2 entry there), in the order walk_v2 checks it. */
static int
walk_stop_status(const uint8_t *buf, Py_ssize_t p, Py_ssize_t end)
{
    const uint8_t *e = buf + p;
    int32_t size;
    if (end - p <= WALK_HEADER_UP_TO_MAGIC)
        return WALK_NEED_MORE;
    if ((size = be32(e + 8)) < WALK_MIN_SIZE)
        return WALK_BAD_SIZE;
    if ((Py_ssize_t)size + WALK_LOG_OVERHEAD > end - p)
        return WALK_NEED_MORE;
    if ((int8_t)e[16] < 2)
        return WALK_LEGACY;
    return WALK_SHORT_V2;
}

/* Walk buf[pos:end) (buf[pos] being at file_position): healthy batches update the state;
 * the first other complete v2 batch is appended to `list` and ends the walk after it.
 * Sets *next (buffer index where the walk stopped) and *status (walk_v2's codes); -1 on
 * a Python error. */
static int
scan_run(struct scan_state *s, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, long long file_position,
         PyTypeObject *batch_type, PyObject *list, Py_ssize_t *next, int *status)
{
    Py_ssize_t p = pos;
    for (;;) {
        /* frame up to three complete v2 entries ahead and CRC them together */
        const uint8_t *ent[3];
        uint32_t computed[3];
        Py_ssize_t tot[3];
        int n = frame_v2(buf, p, end, ent, tot, computed), i;

        if (n == 0) {
            *status = walk_stop_status(buf, p, end);
            *next = p;
            return 0;
        }

        for (i = 0; i < n; i++) {
            const uint8_t *e = ent[i];
            int64_t position = file_position + (p - pos);
            int64_t first = be64(e), lo;
            uint16_t attrs = be16u(e + 21);
            int32_t lod = be32(e + 23), count = be32(e + 57);
            int64_t bts = be64(e + 27), mts = be64(e + 35);
            if ((int8_t)e[16] != 2
                || (attrs & 0x30) != 0
                || (attrs & 0x07) > 4
                || lod < 0
                || count < 0 || (int64_t)count > (int64_t)lod + 1
                || bts < -1 || mts < -1
                || !((attrs & 0x48) != 0 || count == 0 || mts >= bts)
                || be64(e + 43) < -1                       /* producerId */
                || (int16_t)be16u(e + 51) < -1             /* producerEpoch */
                || be32(e + 53) < -1                       /* baseSequence */
                || __builtin_add_overflow(first, (int64_t)lod, &lo)
                || (s->have_prev && first <= s->prev)
                || (s->have_base && (first < s->base || lo - s->base > SCAN_INT32_MAX))
                || computed[i] != be32u(e + 17)) {
                /* not healthy: Python checks it (and what follows, on the next call) */
                *next = p + tot[i];
                *status = WALK_NEED_MORE;
                return hand_to_python(list, batch_type, e, position, tot[i]);
            }
            if (scan_healthy(s, position, first, lo, mts, be32(e + 12)) < 0)
                return -1;
            p += tot[i];
        }
    }
}

/* file_position argument: a non-negative int64 with room for `span` more bytes. */
static int
scan_file_position(PyObject *obj, Py_ssize_t span, long long *out)
{
    int overflow;
    PyObject *idx = PyNumber_Index(obj);
    if (idx == NULL)
        return -1;
    *out = PyLong_AsLongLongAndOverflow(idx, &overflow);
    Py_DECREF(idx);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    if (overflow != 0 || *out < 0 || *out > LLONG_MAX - span) {
        PyErr_SetString(PyExc_OverflowError, "file position out of range");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(scan_v2_doc,
"scan_v2(buf, pos, end, file_position, batch_type, state)\n--\n\n"
"Check the complete v2 batches of ``buf[pos:end]`` the way kafkatool.verify's\n"
"shallow scan does, without a Python object per healthy batch.\n\n"
"A batch is healthy when it is a non-transactional, non-control v2 data batch\n"
"whose CRC-32C matches and whose header fields pass every shallow check\n"
"(kafkatool.verify.batches.Scanner's predicate); for it only ``state`` (a\n"
"kafkatool.verify.batches.ScanState: its attributes are read at the call and\n"
"written back at the return) is updated. The walk stops after the first batch\n"
"that is not healthy and returns it for Python to check. Returns\n"
"``(batches, next_pos, status)`` as walk_v2 does, ``batches`` holding at most\n"
"that one batch.");

/* Parse a window loop's (buf, pos, end, file_position, batch_type, state): the buffer is
 * held in *view on success (release it), nothing on failure. */
static int
window_parse(const char *name, PyObject *const *args, Py_ssize_t nargs, Py_buffer *view,
             Py_ssize_t *pos, Py_ssize_t *end, long long *file_position)
{
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly 6 arguments (%zd given)", name, nargs);
        return -1;
    }
    if (!PyType_Check(args[4]) || !PyType_IsSubtype((PyTypeObject *)args[4], &PyTuple_Type)) {
        PyErr_Format(PyExc_TypeError, "%s(): batch_type must be a subtype of tuple", name);
        return -1;
    }
    if (as_index(args[1], pos) < 0 || as_index(args[2], end) < 0)
        return -1;
    if (PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE) < 0)
        return -1;
    if (*pos < 0 || *pos > *end || *end > view->len) {
        PyErr_Format(PyExc_ValueError,
            "%s: need 0 <= pos (%zd) <= end (%zd) <= len(buf) (%zd)", name, *pos, *end, view->len);
        PyBuffer_Release(view);
        return -1;
    }
    if (scan_file_position(args[3], *end - *pos, file_position) < 0) {
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *
scan_v2(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t pos, end, next = 0;
    long long file_position;
    struct scan_state s;
    PyObject *list = NULL, *result = NULL;
    int status = WALK_NEED_MORE;

    if (window_parse("scan_v2", args, nargs, &view, &pos, &end, &file_position) < 0)
        return NULL;
    if (scan_begin(args[5], &s) == 0 && (list = PyList_New(0)) != NULL &&
        scan_run(&s, (const uint8_t *)view.buf, pos, end, file_position, (PyTypeObject *)args[4], list, &next, &status) == 0 &&
        scan_end(args[5], &s) == 0) {
        result = Py_BuildValue("(Oni)", list, next, status);
    }
    Py_XDECREF(list);
    scan_release(&s);
    PyBuffer_Release(&view);
    return result;
}

#define SCAN_PAUSED 9          /* scan_fd: the byte budget of this call is spent */
#define SCAN_FILL (128 << 10)  /* one pread: small enough that the CRC reads it from L2 */

/* One window pass of a compiled loop: check the complete entries of buf[pos:end] (buf[pos]
 * being at file_position), appending at most one batch to `list` for Python, and set
 * next and status as walk_v2 would. */
typedef int (*run_fn)(void *ctx, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, long long file_position,
                      PyTypeObject *batch_type, PyObject *list, Py_ssize_t *next, int *status);

struct fd_args {
    int fd;
    long long pos, end, bpos, have, budget;
    PyTypeObject *batch_type;
    Py_buffer view;  /* the reused buffer */
};

/* Parse (fd, pos, end, batch_type, state, buffer, buf_pos, buf_len, budget); `*state` gets args[4]. */
static int
fd_parse(const char *name, PyObject *const *args, Py_ssize_t nargs, struct fd_args *a, PyObject **state)
{
    Py_ssize_t end_arg, budget;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly 9 arguments (%zd given)", name, nargs);
        return -1;
    }
    a->fd = PyObject_AsFileDescriptor(args[0]);
    if (a->fd < 0)
        return -1;
    if (!PyType_Check(args[3]) || !PyType_IsSubtype((PyTypeObject *)args[3], &PyTuple_Type)) {
        PyErr_Format(PyExc_TypeError, "%s(): batch_type must be a subtype of tuple", name);
        return -1;
    }
    a->batch_type = (PyTypeObject *)args[3];
    *state = args[4];
    if (as_index(args[2], &end_arg) < 0 || scan_file_position(args[1], 0, &a->pos) < 0 ||
        scan_file_position(args[6], 0, &a->bpos) < 0 || scan_file_position(args[7], 0, &a->have) < 0 ||
        as_index(args[8], &budget) < 0)
        return -1;
    a->end = end_arg;
    a->budget = budget;
    if (a->end < a->pos || budget < 0) {
        PyErr_Format(PyExc_ValueError, "%s(): need pos <= end and budget >= 0", name);
        return -1;
    }
    if (PyObject_GetBuffer(args[5], &a->view, PyBUF_WRITABLE) < 0)
        return -1;
    return 0;
}

/* The pread loop of scan_fd (see its doc), for any run_fn; releases a->view. */
static PyObject *
fd_loop(struct fd_args *a, run_fn run, void *ctx)
{
    Py_ssize_t have, cap, p;
    long long bpos, stop_at;
    int status = WALK_NEED_MORE, eof = 0;
    PyObject *list = NULL, *result = NULL;
    uint8_t *buf = (uint8_t *)a->view.buf;

    cap = a->view.len;
    stop_at = a->budget == 0 || a->budget > LLONG_MAX - a->pos ? LLONG_MAX : a->pos + a->budget;
    /* what the buffer holds, if it still covers pos */
    if (a->have <= cap && a->bpos <= a->pos && a->pos <= a->bpos + a->have) {
        bpos = a->bpos;
        have = (Py_ssize_t)a->have;
        p = (Py_ssize_t)(a->pos - bpos);
    }
    else {
        bpos = a->pos;
        have = 0;
        p = 0;
    }
    if (have > a->end - bpos)  /* never scan past end */
        have = (Py_ssize_t)(a->end - bpos);
    if ((list = PyList_New(0)) == NULL)
        goto done;
    for (;;) {
        Py_ssize_t want;
        ssize_t got;
        if (run(ctx, buf, p, have, bpos + p, a->batch_type, list, &p, &status) < 0)
            goto done;
        if (PyList_GET_SIZE(list) > 0) {
            PyObject *batch = PyList_GET_ITEM(list, 0);
            Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(batch, 1));
            PyObject *data = size < 0 ? NULL : PyBytes_FromStringAndSize((const char *)buf + p - size, size);
            if (data == NULL)
                goto done;
            result = Py_BuildValue("(OOLiLn)", batch, data, bpos + p, status, bpos, have);
            Py_DECREF(data);
            goto done;
        }
        if (status != WALK_NEED_MORE || eof || bpos + have >= a->end) {
            result = Py_BuildValue("(OOLiLn)", Py_None, Py_None, bpos + p, status, bpos, have);
            goto done;
        }
        if (bpos + p >= stop_at) {
            result = Py_BuildValue("(OOLiLn)", Py_None, Py_None, bpos + p, SCAN_PAUSED, bpos, have);
            goto done;
        }
        if (cap - have < SCAN_FILL && p > 0) {
            /* keep the unscanned bytes (part of one entry), read on behind them */
            memmove(buf, buf + p, (size_t)(have - p));
            have -= p;
            bpos += p;
            p = 0;
        }
        if (have == cap) {  /* an entry larger than the buffer */
            result = Py_BuildValue("(OOLiLn)", Py_None, Py_None, bpos + p, status, bpos, have);
            goto done;
        }
        want = cap - have < SCAN_FILL ? cap - have : SCAN_FILL;
        if (want > a->end - (bpos + have))
            want = (Py_ssize_t)(a->end - (bpos + have));
        got = pread(a->fd, buf + have, (size_t)want, (off_t)(bpos + have));
        if (got < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    goto done;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
        if (got == 0)
            eof = 1; /* the file is shorter than `end` (it shrank): stop at its end */
        have += got;
    }
done:
    Py_XDECREF(list);
    PyBuffer_Release(&a->view);
    return result;
}

static int
scan_run_cb(void *ctx, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, long long file_position,
            PyTypeObject *batch_type, PyObject *list, Py_ssize_t *next, int *status)
{
    return scan_run((struct scan_state *)ctx, buf, pos, end, file_position, batch_type, list, next, status);
}

PyDoc_STRVAR(scan_fd_doc,
"scan_fd(fd, pos, end, batch_type, state, buffer, buf_pos, buf_len, budget)\n--\n\n"
"scan_v2 over the file ``fd`` from byte ``pos`` to ``end``, read with pread into\n"
"``buffer`` (a writable bytes-like object, reused across calls) without returning\n"
"to Python between reads. The buffer is filled 128 KiB at a time and scanned after\n"
"each read, so the CRC reads bytes the kernel has just copied (still in L2): one\n"
"large read would copy them out of the cache first.\n\n"
"``buf_pos``/``buf_len`` say what the buffer holds (file bytes\n"
"``[buf_pos, buf_pos + buf_len)`` at its start; pass 0, 0 the first time, then\n"
"what the previous call returned: bytes still needed are not read again).\n"
"The call returns after about ``budget`` bytes (at a batch boundary; 0: no limit).\n\n"
"Returns ``(batch, data, next_pos, status, buf_pos, buf_len)``: ``batch`` is the\n"
"first batch that is not healthy (``data`` a copy of its bytes, ``next_pos`` the\n"
"position after it), or None when the scan stopped for another reason: ``status``\n"
"9 when the budget is spent, else as in walk_v2, with ``next_pos`` where an entry\n"
"that is not a complete v2 batch within ``buffer`` starts (a legacy entry, a bad\n"
"size, the tail, an entry larger than the buffer, or ``end``); the caller walks on\n"
"from there. A file shorter than ``end`` reads as if it ended there.");

static PyObject *
scan_fd(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    struct fd_args a;
    struct scan_state s;
    PyObject *st, *result;

    if (fd_parse("scan_fd", args, nargs, &a, &st) < 0)
        return NULL;
    if (scan_begin(st, &s) < 0) {
        scan_release(&s);
        PyBuffer_Release(&a.view);
        return NULL;
    }
    result = fd_loop(&a, scan_run_cb, &s);
    if (result != NULL && scan_end(st, &s) < 0)
        Py_CLEAR(result);
    scan_release(&s);
    return result;
}

/* ==================================================================== index_v2 */

/* The state index_v2 reads at entry and writes back at exit: a
   kafkatool.segment.index_scan.IndexScanState, one attribute per field (names below, interned
   once). The enum numbers the fields for the tables here. */
enum {
    IX_BASE,              /* int: the segment's base offset */
    IX_INTERVAL,          /* int: index.interval.bytes */
    IX_VALID,             /* int: validBytes, where the next batch must start */
    IX_LAST_ENTRY,        /* int: validBytes when the last offset entry was appended */
    IX_MAX_TS,            /* int: maxTimestampSoFar */
    IX_OFF_MAX_TS,        /* int: offsetOfMaxTimestampSoFar */
    IX_OFF_ENTRIES,       /* int: offset index entries */
    IX_MAX_OFF_ENTRIES,   /* int */
    IX_LAST_OFFSET,       /* int: the offset index's last offset */
    IX_TIME_ENTRIES,      /* int: time index entries */
    IX_MAX_TIME_ENTRIES,  /* int */
    IX_LAST_TIME_TS,      /* int: the time index's last entry */
    IX_LAST_TIME_OFF,     /* int */
    IX_OFFSET_BUF,        /* bytearray: the offset index so far */
    IX_TIME_BUF,          /* bytearray: the time index so far */
    IX_TAKE_TXN,          /* bool: transactional batches are indexed here too (no producer state kept) */
    IX_BATCHES,           /* int: batches indexed */
    IX_FIRST,             /* int | None: the first batch's base offset */
    IX_LAST,              /* int | None: the last batch's last offset */
    IX_SHIFT,             /* int: file position minus validBytes (bytes a repair leaves out before the walk) */
    IX_NSLOTS
};

static const char *const ix_field_names[IX_NSLOTS] = {
    "base", "interval", "valid", "last_entry", "max_ts", "off_max_ts", "off_entries", "max_off_entries",
    "last_offset", "time_entries", "max_time_entries", "last_time_ts", "last_time_off", "offset_buf",
    "time_buf", "take_txn", "batches", "first", "last", "shift",
};
static PyObject *ix_field[IX_NSLOTS]; /* the names above, interned on first use */

/* v2 header fields index_v2 reads (spec 4.1; kafkatool.record.layout.V2) */
enum { IX_AT_CRC = 17, IX_AT_ATTRIBUTES = 21, IX_AT_LAST_OFFSET_DELTA = 23, IX_AT_MAX_TIMESTAMP = 35 };
#define IX_TRANSACTIONAL_BIT 0x10
#define IX_CONTROL_BIT 0x20

static int
ix_intern(void)
{
    int i;
    if (ix_field[0] != NULL)
        return 0;
    for (i = 0; i < IX_NSLOTS; i++) {
        PyObject *name = PyUnicode_InternFromString(ix_field_names[i]);
        if (name == NULL)
            return -1;
        ix_field[i] = name; /* kept for the life of the process */
    }
    return 0;
}

/* state.<field>, a new reference. */
static PyObject *
ix_item(PyObject *st, int slot)
{
    return PyObject_GetAttr(st, ix_field[slot]);
}

static int
ix_get(PyObject *st, int slot, int64_t *out)
{
    int overflow;
    long long v;
    PyObject *o = ix_item(st, slot);
    if (o == NULL)
        return -1;
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    Py_DECREF(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "index state field %s out of range", ix_field_names[slot]);
        return -1;
    }
    *out = v;
    return 0;
}

/* An int or None field: *present says which. Python's offsets can leave the int64 range
 * (baseOffset + lastOffsetDelta of a damaged batch); they are clamped, which only ever makes a
 * batch look unhealthy, and Python then checks it exactly. */
static int
ix_get_opt(PyObject *st, int slot, int64_t *value, int *present)
{
    int overflow;
    long long v;
    PyObject *o = ix_item(st, slot);
    if (o == NULL)
        return -1;
    *present = o != Py_None;
    *value = 0;
    if (*present) {
        v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(o);
            return -1;
        }
        *value = overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : (int64_t)v;
    }
    Py_DECREF(o);
    return 0;
}

static int
ix_set(PyObject *st, int slot, PyObject *value) /* steals value */
{
    int rc;
    if (value == NULL)
        return -1;
    rc = PyObject_SetAttr(st, ix_field[slot], value);
    Py_DECREF(value);
    return rc;
}

static int
ix_append(PyObject *ba, const uint8_t *entry, Py_ssize_t n)
{
    Py_ssize_t len = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, len + n) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(ba) + len, entry, (size_t)n);
    return 0;
}

static inline void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* The index state, unpacked for the duration of one call (obuf and tbuf: owned references). */
struct ix_state {
    int64_t base, interval, valid, last_entry, max_ts, off_max_ts, off_entries, max_off_entries, last_offset;
    int64_t time_entries, max_time_entries, last_time_ts, last_time_off, batches, first, last, shift;
    int take_txn, have_first, have_last;
    PyObject *obuf, *tbuf;
};

static void
ix_release(struct ix_state *x)
{
    Py_CLEAR(x->obuf);
    Py_CLEAR(x->tbuf);
}

static int
ix_begin(PyObject *st, struct ix_state *x)
{
    PyObject *take;
    memset(x, 0, sizeof(*x));
    if (!PyObject_HasAttr(st, ix_field[IX_SHIFT])) {
        PyErr_SetString(PyExc_TypeError, "index state must be a kafkatool.segment.index_scan.IndexScanState");
        return -1;
    }
    if ((x->obuf = ix_item(st, IX_OFFSET_BUF)) == NULL || (x->tbuf = ix_item(st, IX_TIME_BUF)) == NULL)
        return -1;
    if (!PyByteArray_CheckExact(x->obuf) || !PyByteArray_CheckExact(x->tbuf)) {
        PyErr_SetString(PyExc_TypeError, "the index state's offset_buf and time_buf must be bytearrays");
        return -1;
    }
    if (ix_get(st, IX_BASE, &x->base) < 0 || ix_get(st, IX_INTERVAL, &x->interval) < 0 ||
        ix_get(st, IX_VALID, &x->valid) < 0 || ix_get(st, IX_LAST_ENTRY, &x->last_entry) < 0 ||
        ix_get(st, IX_MAX_TS, &x->max_ts) < 0 || ix_get(st, IX_OFF_MAX_TS, &x->off_max_ts) < 0 ||
        ix_get(st, IX_OFF_ENTRIES, &x->off_entries) < 0 || ix_get(st, IX_MAX_OFF_ENTRIES, &x->max_off_entries) < 0 ||
        ix_get(st, IX_LAST_OFFSET, &x->last_offset) < 0 || ix_get(st, IX_TIME_ENTRIES, &x->time_entries) < 0 ||
        ix_get(st, IX_MAX_TIME_ENTRIES, &x->max_time_entries) < 0 || ix_get(st, IX_LAST_TIME_TS, &x->last_time_ts) < 0 ||
        ix_get(st, IX_LAST_TIME_OFF, &x->last_time_off) < 0 || ix_get(st, IX_BATCHES, &x->batches) < 0 ||
        ix_get(st, IX_SHIFT, &x->shift) < 0)
        return -1;
    if ((take = ix_item(st, IX_TAKE_TXN)) == NULL)
        return -1;
    x->take_txn = PyObject_IsTrue(take);
    Py_DECREF(take);
    if (x->take_txn < 0)
        return -1;
    if (ix_get_opt(st, IX_FIRST, &x->first, &x->have_first) < 0 || ix_get_opt(st, IX_LAST, &x->last, &x->have_last) < 0)
        return -1;
    return 0;
}

static int
ix_end(PyObject *st, struct ix_state *x)
{
    if (ix_set(st, IX_VALID, PyLong_FromLongLong(x->valid)) < 0 ||
        ix_set(st, IX_LAST_ENTRY, PyLong_FromLongLong(x->last_entry)) < 0 ||
        ix_set(st, IX_MAX_TS, PyLong_FromLongLong(x->max_ts)) < 0 ||
        ix_set(st, IX_OFF_MAX_TS, PyLong_FromLongLong(x->off_max_ts)) < 0 ||
        ix_set(st, IX_OFF_ENTRIES, PyLong_FromLongLong(x->off_entries)) < 0 ||
        ix_set(st, IX_LAST_OFFSET, PyLong_FromLongLong(x->last_offset)) < 0 ||
        ix_set(st, IX_TIME_ENTRIES, PyLong_FromLongLong(x->time_entries)) < 0 ||
        ix_set(st, IX_LAST_TIME_TS, PyLong_FromLongLong(x->last_time_ts)) < 0 ||
        ix_set(st, IX_LAST_TIME_OFF, PyLong_FromLongLong(x->last_time_off)) < 0 ||
        ix_set(st, IX_BATCHES, PyLong_FromLongLong(x->batches)) < 0 ||
        (x->have_first && ix_set(st, IX_FIRST, PyLong_FromLongLong(x->first)) < 0) ||
        (x->have_last && ix_set(st, IX_LAST, PyLong_FromLongLong(x->last)) < 0))
        return -1;
    return 0;
}

/* recover()'s loop over the complete entries of buf[pos:end] (a run_fn). */
static int
ix_run(void *ctx, const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, long long file_position,
       PyTypeObject *batch_type, PyObject *list, Py_ssize_t *next, int *status)
{
    struct ix_state *x = (struct ix_state *)ctx;
    Py_ssize_t p = pos;
    for (;;) {
        /* frame up to three complete v2 entries ahead and CRC them together */
        const uint8_t *ent[3];
        uint32_t computed[3];
        Py_ssize_t tot[3];
        int n = frame_v2(buf, p, end, ent, tot, computed), i;

        if (n == 0) {
            *status = walk_stop_status(buf, p, end);
            *next = p;
            return 0;
        }

        for (i = 0; i < n; i++) {
            const uint8_t *e = ent[i];
            int64_t position = file_position + (p - pos);
            int64_t bo = be64(e), lo, mts = be64(e + IX_AT_MAX_TIMESTAMP);
            int64_t nmax_ts = x->max_ts, noff_max = x->off_max_ts;
            int32_t lod = be32(e + IX_AT_LAST_OFFSET_DELTA);
            int index_now = 0;
            /* every condition under which Python would stop or raise: Python handles that batch */
            int python = computed[i] != be32u(e + IX_AT_CRC)
                /* control batches always: recovery reads their marker (truncate's cut, spec 12.2) */
                || (be16u(e + IX_AT_ATTRIBUTES) & (x->take_txn ? IX_CONTROL_BIT : IX_CONTROL_BIT | IX_TRANSACTIONAL_BIT)) != 0
                || position - x->shift != x->valid
                || __builtin_add_overflow(bo, (int64_t)lod, &lo)
                || lo < x->base || lo - x->base > SCAN_INT32_MAX;
            if (!python) {
                if (mts > nmax_ts) {
                    nmax_ts = mts;
                    noff_max = lo;
                }
                index_now = x->valid - x->last_entry > x->interval;
                if (index_now) {
                    python = x->off_entries >= x->max_off_entries
                        || (x->off_entries != 0 && lo <= x->last_offset)
                        || x->valid > SCAN_INT32_MAX
                        || x->time_entries >= x->max_time_entries - 1
                        || (x->time_entries != 0 && noff_max < x->last_time_off)
                        || (x->time_entries != 0 && nmax_ts < x->last_time_ts)
                        || noff_max < x->base || noff_max - x->base > SCAN_INT32_MAX;
                }
            }
            if (python) {
                *next = p + tot[i];
                *status = WALK_NEED_MORE;
                return hand_to_python(list, batch_type, e, position, tot[i]);
            }
            x->max_ts = nmax_ts;
            x->off_max_ts = noff_max;
            if (index_now) {
                uint8_t entry[12];
                put_be32(entry, (uint32_t)(lo - x->base));
                put_be32(entry + 4, (uint32_t)x->valid);
                if (ix_append(x->obuf, entry, 8) < 0)
                    return -1;
                x->off_entries++;
                x->last_offset = lo;
                if (x->max_ts > x->last_time_ts) {
                    put_be32(entry, (uint32_t)((uint64_t)x->max_ts >> 32));
                    put_be32(entry + 4, (uint32_t)x->max_ts);
                    put_be32(entry + 8, (uint32_t)(x->off_max_ts - x->base));
                    if (ix_append(x->tbuf, entry, 12) < 0)
                        return -1;
                    x->time_entries++;
                    x->last_time_ts = x->max_ts;
                    x->last_time_off = x->off_max_ts;
                }
                x->last_entry = x->valid;
            }
            x->valid += tot[i];
            x->batches++;
            if (!x->have_first) {
                x->first = bo;
                x->have_first = 1;
            }
            x->last = lo;
            x->have_last = 1;
            p += tot[i];
        }
    }
}

PyDoc_STRVAR(index_v2_doc,
"index_v2(buf, pos, end, file_position, batch_type, state)\n--\n\n"
"LogSegment.recover's indexing loop (spec 8.3, 12.2) over the complete v2 batches\n"
"of ``buf[pos:end]``, without a Python object per batch.\n\n"
"Each batch whose CRC-32C matches, that is not a control batch nor transactional\n"
"(unless the state says to take transactional data batches too), and that kafkatool.segment.index.IndexBuilder.add_batch\n"
"would accept without an error is indexed here: ``state`` (an IndexScanState of\n"
"kafkatool.segment.index_scan) is updated and the entries appended to its bytearrays.\n"
"The walk stops after the first other batch and returns it, with the state as it\n"
"was before that batch, for Python to handle. Returns ``(batches, next_pos,\n"
"status)`` as walk_v2 does, ``batches`` holding at most that one batch.");

static PyObject *
index_v2(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t pos, end, next = 0;
    long long file_position;
    struct ix_state x = {0};
    PyObject *list = NULL, *result = NULL;
    int status = WALK_NEED_MORE;

    if (window_parse("index_v2", args, nargs, &view, &pos, &end, &file_position) < 0)
        return NULL;
    if (ix_intern() == 0 && ix_begin(args[5], &x) == 0 && (list = PyList_New(0)) != NULL &&
        ix_run(&x, (const uint8_t *)view.buf, pos, end, file_position, (PyTypeObject *)args[4], list, &next, &status) == 0 &&
        ix_end(args[5], &x) == 0)
        result = Py_BuildValue("(Oni)", list, next, status);
    ix_release(&x);
    Py_XDECREF(list);
    PyBuffer_Release(&view);
    return result;
}

/* ==================================================================== encoders
 *
 * encode_v2_records / encode_legacy_messages: the per-record loops of
 * kafkatool.record.encode (py_v2_records / py_legacy_messages are the reference: the
 * same bytes for every input they accept). A record is a sequence whose items 0-4 are
 * (offset, timestamp, key, value, headers); key and value None or bytes-like; a
 * header (key str|bytes-like, value bytes-like|None). An int that does not fit 64
 * bits (or a legacy size past int32) raises OverflowError, a value of another type
 * TypeError: the Python wrapper then runs the reference, which gives its own answer.
 */

/* A growable output buffer: a bytes object resized as it fills. */
struct obuf {
    PyObject *bytes;
    char *p;
    Py_ssize_t len, cap;
};

static int
ob_init(struct obuf *o, Py_ssize_t cap)
{
    if (cap < 64)
        cap = 64;
    o->bytes = PyBytes_FromStringAndSize(NULL, cap);
    if (o->bytes == NULL)
        return -1;
    o->p = PyBytes_AS_STRING(o->bytes);
    o->len = 0;
    o->cap = cap;
    return 0;
}

/* Room for n more bytes; returns the write pointer or NULL. */
static inline char *
ob_reserve(struct obuf *o, Py_ssize_t n)
{
    if (o->cap - o->len < n) {
        Py_ssize_t cap = o->cap;
        if (n > PY_SSIZE_T_MAX - o->len) {
            PyErr_NoMemory();
            return NULL;
        }
        while (cap - o->len < n)
            cap = cap > PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : cap * 2;
        if (_PyBytes_Resize(&o->bytes, cap) < 0)
            return NULL;
        o->p = PyBytes_AS_STRING(o->bytes);
        o->cap = cap;
    }
    return o->p + o->len;
}

static PyObject *
ob_finish(struct obuf *o)
{
    if (_PyBytes_Resize(&o->bytes, o->len) < 0)
        return NULL;
    return o->bytes;
}

static inline int
uvarint_size(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *
put_uvarint(char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

/* encode_varint's zig-zag of a value given as its low 64 bits (two's complement):
 * ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF reads bits 0-62 only. */
static inline uint64_t
zz32(uint64_t v)
{
    return ((v << 1) ^ (v >> 31)) & UINT64_C(0xFFFFFFFF);
}

/* encode_varlong's zig-zag of a - b; OverflowError (-1) when the difference does not
 * fit 64 bits (Python's (v >> 63) then reads bits past the 64th: the caller runs the
 * reference). */
static inline int
zz64_diff(int64_t a, int64_t b, uint64_t *out)
{
    int64_t d;
    if (__builtin_sub_overflow(a, b, &d)) {
        PyErr_SetString(PyExc_OverflowError, "timestamp delta out of range");
        return -1;
    }
    *out = ((uint64_t)d << 1) ^ (d < 0 ? ~UINT64_C(0) : 0);
    return 0;
}

/* An item of a record as an int64; OverflowError when it does not fit. */
static int
as_int64(PyObject *o, int64_t *out)
{
    long long v;
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "an integer is required, not '%.100s'", Py_TYPE(o)->tp_name);
        return -1;
    }
    v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* A bytes-like (or None: *view->buf NULL, len -1) field. bytes are read in place. */
struct field {
    const char *buf;
    Py_ssize_t len; /* -1: None */
    Py_buffer view;
    int has_view;
};

static int
field_get(PyObject *o, struct field *f)
{
    f->has_view = 0;
    if (o == Py_None) {
        f->buf = NULL;
        f->len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(o)) {
        f->buf = PyBytes_AS_STRING(o);
        f->len = PyBytes_GET_SIZE(o);
        return 0;
    }
    if (PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "a bytes-like object is required, not 'str'");
        return -1;
    }
    if (PyObject_GetBuffer(o, &f->view, PyBUF_SIMPLE) < 0)
        return -1;
    f->has_view = 1;
    f->buf = (const char *)f->view.buf;
    f->len = f->view.len;
    return 0;
}

static inline void
field_release(struct field *f)
{
    if (f->has_view) {
        PyBuffer_Release(&f->view);
        f->has_view = 0;
    }
}

/* A header key: str as UTF-8, else bytes-like. */
static int
header_key_get(PyObject *o, struct field *f)
{
    if (PyUnicode_Check(o)) {
        f->has_view = 0;
        f->buf = PyUnicode_AsUTF8AndSize(o, &f->len);
        return f->buf == NULL ? -1 : 0;
    }
    if (o == Py_None) {
        PyErr_SetString(PyExc_TypeError, "a header key cannot be None");
        return -1;
    }
    return field_get(o, f);
}

/* The items of record `rec` (a tuple, or any sequence of at least n items) in items[]:
 * borrowed for a tuple, new references in *held otherwise. */
static int
record_items(PyObject *rec, PyObject **items, int n, PyObject **held)
{
    int i;
    *held = NULL;
    if (PyTuple_Check(rec)) {
        if (PyTuple_GET_SIZE(rec) < n) {
            PyErr_SetString(PyExc_IndexError, "tuple index out of range");
            return -1;
        }
        for (i = 0; i < n; i++)
            items[i] = PyTuple_GET_ITEM(rec, i);
        return 0;
    }
    *held = PySequence_Fast(rec, "a record must be a sequence");
    if (*held == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(*held) < n) {
        Py_CLEAR(*held);
        PyErr_SetString(PyExc_IndexError, "record index out of range");
        return -1;
    }
    for (i = 0; i < n; i++)
        items[i] = PySequence_Fast_GET_ITEM(*held, i);
    return 0;
}

/* Size of the headers section of one record (count varint + headers), from `hdrs`
 * (a sequence of 2-item sequences); its fast sequence in *fast (new reference). */
static int
headers_size(PyObject *hdrs, PyObject **fast, Py_ssize_t *size)
{
    Py_ssize_t n, j, total;
    *fast = PySequence_Fast(hdrs, "headers must be a sequence");
    if (*fast == NULL)
        return -1;
    n = PySequence_Fast_GET_SIZE(*fast);
    total = uvarint_size(zz32((uint64_t)n));
    for (j = 0; j < n; j++) {
        PyObject *h = PySequence_Fast_GET_ITEM(*fast, j), *hk, *hv;
        struct field fk, fv;
        if (!PyTuple_Check(h) || PyTuple_GET_SIZE(h) != 2) {
            PyErr_SetString(PyExc_TypeError, "a header must be a (key, value) tuple");
            return -1;
        }
        hk = PyTuple_GET_ITEM(h, 0);
        hv = PyTuple_GET_ITEM(h, 1);
        if (header_key_get(hk, &fk) < 0)
            return -1;
        total += uvarint_size(zz32((uint64_t)fk.len)) + fk.len;
        field_release(&fk);
        if (field_get(hv, &fv) < 0)
            return -1;
        total += uvarint_size(zz32((uint64_t)(int64_t)fv.len)) + (fv.len > 0 ? fv.len : 0);
        field_release(&fv);
    }
    *size = total;
    return 0;
}

static int
headers_write(PyObject *fast, char **pp)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), j;
    char *p = put_uvarint(*pp, zz32((uint64_t)n));
    for (j = 0; j < n; j++) {
        PyObject *h = PySequence_Fast_GET_ITEM(fast, j);
        struct field fk, fv;
        if (header_key_get(PyTuple_GET_ITEM(h, 0), &fk) < 0)
            return -1;
        p = put_uvarint(p, zz32((uint64_t)fk.len));
        memcpy(p, fk.buf, (size_t)fk.len);
        p += fk.len;
        field_release(&fk);
        if (field_get(PyTuple_GET_ITEM(h, 1), &fv) < 0)
            return -1;
        p = put_uvarint(p, zz32((uint64_t)(int64_t)fv.len));
        if (fv.len > 0) {
            memcpy(p, fv.buf, (size_t)fv.len);
            p += fv.len;
        }
        field_release(&fv);
    }
    *pp = p;
    return 0;
}

PyDoc_STRVAR(encode_v2_records_doc,
"encode_v2_records(records, base_offset, base_timestamp, headers)\n--\n\n"
"kafkatool.record.encode.py_v2_records(records, base_offset, base_timestamp,\n"
"headers=headers): the uncompressed v2 records section (spec 4.2), record attributes 0.\n"
"OverflowError / TypeError for what it does not take (the caller runs the reference).");

static PyObject *
encode_v2_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *seq = NULL, *hfast = NULL, *held = NULL;
    Py_ssize_t n, r;
    int64_t base_off, base_ts;
    int with_headers;
    struct obuf o = {NULL, NULL, 0, 0};
    struct field fk = {0}, fv = {0};

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "encode_v2_records() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (as_int64(args[1], &base_off) < 0 || as_int64(args[2], &base_ts) < 0)
        return NULL;
    if ((with_headers = PyObject_IsTrue(args[3])) < 0)
        return NULL;
    seq = PySequence_Fast(args[0], "records must be a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (ob_init(&o, n * 64) < 0)
        goto fail;
    for (r = 0; r < n; r++) {
        PyObject *it[5];
        int64_t off, ts;
        uint64_t tsz, odz, klz, vlz;
        Py_ssize_t body, hsize = 1;
        char *p;

        if (record_items(PySequence_Fast_GET_ITEM(seq, r), it, 5, &held) < 0)
            goto fail;
        if (as_int64(it[0], &off) < 0 || as_int64(it[1], &ts) < 0)
            goto fail;
        if (field_get(it[2], &fk) < 0 || field_get(it[3], &fv) < 0)
            goto fail;
        if (with_headers && it[4] != Py_None) {
            int truth = PyObject_IsTrue(it[4]);
            if (truth < 0)
                goto fail;
            if (truth && headers_size(it[4], &hfast, &hsize) < 0)
                goto fail;
        }
        if (zz64_diff(ts, base_ts, &tsz) < 0)
            goto fail;
        odz = zz32((uint64_t)off - (uint64_t)base_off);
        klz = zz32((uint64_t)(int64_t)fk.len);
        vlz = zz32((uint64_t)(int64_t)fv.len);
        body = 1 + uvarint_size(tsz) + uvarint_size(odz) + uvarint_size(klz) + (fk.len > 0 ? fk.len : 0) +
               uvarint_size(vlz) + (fv.len > 0 ? fv.len : 0) + hsize;
        p = ob_reserve(&o, body + 10);
        if (p == NULL)
            goto fail;
        p = put_uvarint(p, zz32((uint64_t)body));
        *p++ = 0; /* record attributes */
        p = put_uvarint(p, tsz);
        p = put_uvarint(p, odz);
        p = put_uvarint(p, klz);
        if (fk.len > 0) {
            memcpy(p, fk.buf, (size_t)fk.len);
            p += fk.len;
        }
        p = put_uvarint(p, vlz);
        if (fv.len > 0) {
            memcpy(p, fv.buf, (size_t)fv.len);
            p += fv.len;
        }
        if (hfast != NULL) {
            if (headers_write(hfast, &p) < 0)
                goto fail;
            Py_CLEAR(hfast);
        }
        else
            *p++ = 0; /* no headers */
        o.len = p - o.p;
        field_release(&fk);
        field_release(&fv);
        Py_CLEAR(held);
    }
    Py_DECREF(seq);
    return ob_finish(&o);
fail:
    field_release(&fk);
    field_release(&fv);
    Py_XDECREF(hfast);
    Py_XDECREF(held);
    Py_XDECREF(seq);
    Py_XDECREF(o.bytes);
    return NULL;
}

/* ------------------------------------------------------------------ CRC-32 (zlib's) */

static uint32_t crc32_table[8][256]; /* slicing-by-8, reflected 0xEDB88320 */
static int crc32_ready = 0;

static void
crc32_init_tables(void)
{
    uint32_t i, c;
    int k, t;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc32_table[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (t = 1; t < 8; t++)
            crc32_table[t][i] = (crc32_table[t - 1][i] >> 8) ^ crc32_table[0][crc32_table[t - 1][i] & 0xFF];
    crc32_ready = 1;
}

/* Finished CRC-32 (zlib.crc32) of [p, p+len) continuing from the finished CRC `value`. */
static uint32_t
crc32_update(uint32_t value, const uint8_t *p, size_t len)
{
    uint32_t c = value ^ 0xFFFFFFFFu;
    while (len && ((uintptr_t)p & 7)) {
        c = crc32_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        len--;
    }
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = crc32_table[7][lo & 0xFF] ^ crc32_table[6][(lo >> 8) & 0xFF] ^ crc32_table[5][(lo >> 16) & 0xFF] ^
            crc32_table[4][lo >> 24] ^ crc32_table[3][hi & 0xFF] ^ crc32_table[2][(hi >> 8) & 0xFF] ^
            crc32_table[1][(hi >> 16) & 0xFF] ^ crc32_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = crc32_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static inline void
put_be64(char *p, uint64_t v)
{
    int i;
    for (i = 7; i >= 0; i--) {
        ((uint8_t *)p)[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline void
put_be32c(char *p, uint32_t v)
{
    ((uint8_t *)p)[0] = (uint8_t)(v >> 24);
    ((uint8_t *)p)[1] = (uint8_t)(v >> 16);
    ((uint8_t *)p)[2] = (uint8_t)(v >> 8);
    ((uint8_t *)p)[3] = (uint8_t)v;
}

PyDoc_STRVAR(encode_legacy_messages_doc,
"encode_legacy_messages(records, magic, relative_to, timestamp, attributes)\n--\n\n"
"kafkatool.record.encode.py_legacy_messages(records, magic, relative_to=relative_to,\n"
"timestamp=timestamp, attributes=attributes) for magic 0 or 1 and attributes 0-255:\n"
"one message with log overhead and CRC-32 per record (spec 5.1). OverflowError /\n"
"TypeError for what it does not take (the caller runs the reference).");

static PyObject *
encode_legacy_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *seq = NULL, *held = NULL;
    Py_ssize_t n, r;
    long magic, attrs;
    int64_t rel = 0, fixed_ts = 0;
    int have_ts;
    struct obuf o = {NULL, NULL, 0, 0};
    struct field fk = {0}, fv = {0};

    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "encode_legacy_messages() takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    magic = PyLong_AsLong(args[1]);
    if (magic == -1 && PyErr_Occurred())
        return NULL;
    attrs = PyLong_AsLong(args[4]);
    if (attrs == -1 && PyErr_Occurred())
        return NULL;
    if ((magic != 0 && magic != 1) || attrs < 0 || attrs > 255) {
        PyErr_SetString(PyExc_ValueError, "encode_legacy_messages: magic 0 or 1, attributes 0-255");
        return NULL;
    }
    if (args[2] != Py_None && as_int64(args[2], &rel) < 0)
        return NULL;
    have_ts = args[3] != Py_None;
    if (have_ts && as_int64(args[3], &fixed_ts) < 0)
        return NULL;
    if (!crc32_ready)
        crc32_init_tables();
    seq = PySequence_Fast(args[0], "records must be a sequence");
    if (seq == NULL)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (ob_init(&o, n * 64) < 0)
        goto fail;
    for (r = 0; r < n; r++) {
        PyObject *it[4];
        int64_t off, ts = 0, rel_off;
        Py_ssize_t size, kl, vl;
        char *p, *crc_at;

        if (record_items(PySequence_Fast_GET_ITEM(seq, r), it, 4, &held) < 0)
            goto fail;
        if (as_int64(it[0], &off) < 0)
            goto fail;
        if (magic == 1) {
            if (have_ts)
                ts = fixed_ts;
            else if (as_int64(it[1], &ts) < 0)
                goto fail;
        }
        if (__builtin_sub_overflow(off, rel, &rel_off)) {
            PyErr_SetString(PyExc_OverflowError, "offset out of range");
            goto fail;
        }
        if (field_get(it[2], &fk) < 0 || field_get(it[3], &fv) < 0)
            goto fail;
        kl = fk.len > 0 ? fk.len : 0;
        vl = fv.len > 0 ? fv.len : 0;
        size = (magic == 1 ? 22 : 14) + kl + vl;
        if (kl > INT32_MAX || vl > INT32_MAX || size > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "message size out of range");
            goto fail;
        }
        p = ob_reserve(&o, size + 12);
        if (p == NULL)
            goto fail;
        put_be64(p, (uint64_t)rel_off);
        put_be32c(p + 8, (uint32_t)size);
        crc_at = p + 12;
        p += 16;
        *p++ = (char)magic;
        *p++ = (char)attrs;
        if (magic == 1) {
            put_be64(p, (uint64_t)ts);
            p += 8;
        }
        put_be32c(p, (uint32_t)(fk.len < 0 ? -1 : (int32_t)fk.len));
        p += 4;
        if (kl) {
            memcpy(p, fk.buf, (size_t)kl);
            p += kl;
        }
        put_be32c(p, (uint32_t)(fv.len < 0 ? -1 : (int32_t)fv.len));
        p += 4;
        if (vl) {
            memcpy(p, fv.buf, (size_t)vl);
            p += vl;
        }
        put_be32c(crc_at, crc32_update(0, (const uint8_t *)crc_at + 4, (size_t)(p - crc_at - 4)));
        o.len = p - o.p;
        field_release(&fk);
        field_release(&fv);
        Py_CLEAR(held);
    }
    Py_DECREF(seq);
    return ob_finish(&o);
fail:
    field_release(&fk);
    field_release(&fv);
    Py_XDECREF(held);
    Py_XDECREF(seq);
    Py_XDECREF(o.bytes);
    return NULL;
}

PyDoc_STRVAR(crc32_doc,
"crc32(data, value=0)\n--\n\n"
"CRC-32 (zlib.crc32) of ``data`` continuing from ``value``; unsigned. The table-driven\n"
"code encode_legacy_messages uses (for tests).");

static PyObject *
py_crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_buffer view;
    uint32_t value, crc;

    if (crc32c_args("crc32", args, nargs, kwnames, &view, &value) < 0)
        return NULL;
    if (!crc32_ready)
        crc32_init_tables();
    crc = crc32_update(value, (const uint8_t *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* ==================================================================== legacy inner messages */

#define LEGACY_MORE 0     /* fewer than 12 bytes left, or the next message is not complete */
#define LEGACY_BAD_SIZE 1 /* the next message's size field is below RECORD_OVERHEAD_V0 (14) */
#define LEGACY_LIMIT 2    /* `limit` messages decoded: call again from next_pos */

PyDoc_STRVAR(decode_legacy_inner_doc,
"decode_legacy_inner(buf, pos, end, limit)\n--\n\n"
"The complete legacy (v0/v1) messages of ``buf[pos:end]`` (a compressed wrapper's\n"
"decompressed inner messages, spec 5.2), each decoded as\n"
"kafkatool.record.legacy.decode_message(buf, p, end) decodes it: a list of\n"
"``(offset, size, crc, magic, attributes, timestamp, key, value, crc_valid)``, with the\n"
"same InvalidRecordError (message, position in ``buf``, kind) for a bad message.\n"
"Returns ``(entries, next_pos, status)``: status 0, fewer than 12 bytes or an incomplete\n"
"message left at next_pos; 1, the message at next_pos has a size field below 14 (the\n"
"caller raises); 2, ``limit`` messages decoded.");

static PyObject *
decode_legacy_inner(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t pos, end, limit, p, n = 0;
    const uint8_t *buf;
    PyObject *list = NULL, *result = NULL;
    int status = LEGACY_MORE;

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "decode_legacy_inner() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    pos = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
    end = pos == -1 && PyErr_Occurred() ? -1 : PyNumber_AsSsize_t(args[2], PyExc_OverflowError);
    limit = end == -1 && PyErr_Occurred() ? -1 : PyNumber_AsSsize_t(args[3], PyExc_OverflowError);
    if (PyErr_Occurred())
        goto done;
    if (pos < 0 || end < pos || end > view.len || limit < 0) {
        PyErr_Format(PyExc_ValueError, "decode_legacy_inner: need 0 <= pos %zd <= end %zd <= %zd and limit >= 0",
                     pos, end, view.len);
        goto done;
    }
    if (!crc32_ready)
        crc32_init_tables();
    buf = (const uint8_t *)view.buf;
    list = PyList_New(0);
    if (list == NULL)
        goto done;
    p = pos;
    for (;;) {
        int32_t size, kl, vl;
        int64_t ts = -1;
        int magic, attrs;
        uint32_t crc, computed;
        Py_ssize_t msg_end, i;
        PyObject *key, *value, *t;

        if (n >= limit) {
            status = LEGACY_LIMIT;
            break;
        }
        if (end - p < 12)
            break;
        size = be32(buf + p + 8);
        if (size < 14) {
            status = LEGACY_BAD_SIZE;
            break;
        }
        if ((Py_ssize_t)size > end - p - 12)
            break;
        msg_end = p + 12 + size; /* >= p + 26: the v1 timestamp is inside */
        crc = be32u(buf + p + 12);
        magic = (int8_t)buf[p + 16];
        attrs = buf[p + 17];
        if (magic != 0 && magic != 1) {
            raise_invalid(p + 16, "Invalid magic used in LegacyRecord: %d", magic);
            set_error_kind("unknown_magic");
            goto done;
        }
        i = p + 18;
        if (magic == 1) {
            ts = be64(buf + i);
            i += 8;
        }
        if (i + 4 > msg_end)
            goto structure;
        kl = be32(buf + i);
        i += 4;
        if (kl >= 0) {
            if (i + kl > msg_end)
                goto structure;
            i += kl;
        }
        if (i + 4 > msg_end)
            goto structure;
        vl = be32(buf + i);
        i += 4;
        if (vl >= 0 && i + vl > msg_end)
            goto structure;
        computed = crc32_update(0, buf + p + 16, (size_t)(msg_end - p - 16));
        i = p + (magic == 1 ? 26 : 18) + 4;
        if ((t = PyTuple_New(9)) == NULL)
            goto done;
        if (kl < 0) {
            Py_INCREF(Py_None);
            key = Py_None;
        }
        else
            key = PyBytes_FromStringAndSize((const char *)buf + i, kl);
        if (kl > 0)
            i += kl;
        i += 4;
        if (vl < 0) {
            Py_INCREF(Py_None);
            value = Py_None;
        }
        else
            value = PyBytes_FromStringAndSize((const char *)buf + i, vl);
        PyTuple_SET_ITEM(t, 6, key);
        PyTuple_SET_ITEM(t, 7, value);
        PyTuple_SET_ITEM(t, 0, PyLong_FromLongLong((long long)be64(buf + p)));
        PyTuple_SET_ITEM(t, 1, PyLong_FromLong(size));
        PyTuple_SET_ITEM(t, 2, PyLong_FromUnsignedLong(crc));
        PyTuple_SET_ITEM(t, 3, PyLong_FromLong(magic));
        PyTuple_SET_ITEM(t, 4, PyLong_FromLong(attrs));
        PyTuple_SET_ITEM(t, 5, PyLong_FromLongLong((long long)ts));
        Py_INCREF(computed == crc ? Py_True : Py_False);
        PyTuple_SET_ITEM(t, 8, computed == crc ? Py_True : Py_False);
        if (key == NULL || value == NULL || PyTuple_GET_ITEM(t, 0) == NULL || PyTuple_GET_ITEM(t, 1) == NULL ||
            PyTuple_GET_ITEM(t, 2) == NULL || PyTuple_GET_ITEM(t, 3) == NULL || PyTuple_GET_ITEM(t, 4) == NULL ||
            PyTuple_GET_ITEM(t, 5) == NULL) {
            Py_DECREF(t); /* NULL items are skipped by the tuple's dealloc */
            goto done;
        }
        if (PyList_Append(list, t) < 0) {
            Py_DECREF(t);
            goto done;
        }
        Py_DECREF(t);
        n++;
        p = msg_end;
        continue;
    structure:
        raise_invalid(p, "Found invalid record structure (key or value runs past the message end)");
        goto done;
    }
    result = Py_BuildValue("(Oni)", list, p, status);
done:
    Py_XDECREF(list);
    PyBuffer_Release(&view);
    return result;
}

/* ==================================================================== legacy wrapper -> v2 records */

PyDoc_STRVAR(legacy_inner_to_v2_doc,
"legacy_inner_to_v2(inner, wrapper_magic, wrapper_offset, log_append_time)\n--\n\n"
"A legacy wrapper's decompressed inner messages (``inner``, all of them) as the records\n"
"section of one v2 batch, without a Python object per record: the records\n"
"kafkatool.record.legacy.iter_legacy_record_chunks yields for the wrapper (absolute\n"
"offsets: v1 inner offsets relative to the wrapper's, spec 5.2; timestamps: -1 for a v0\n"
"message, ``log_append_time`` when it is not None, else the message's own), encoded as\n"
"kafkatool.record.encode.v2_records(records, first offset, first timestamp,\n"
"headers=False) encodes them. Returns ``(body, count, base_offset, last_offset,\n"
"base_timestamp, max_timestamp)``, or None for anything out of the ordinary (no message,\n"
"a size below 14 or a message cut short, an unknown magic, a key or value past its\n"
"message, an inner CRC-32 that does not match, a compressed inner message, a v1 wrapper\n"
"offset below the last inner one, an offset or timestamp delta out of range): the\n"
"caller then takes the general path, which raises or handles it.");

static PyObject *
legacy_inner_to_v2(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    const uint8_t *buf;
    Py_ssize_t len, p, n = 0, total = 0;
    long wmagic;
    int64_t woffset, lat = 0, last_rel = 0, base_offset = 0;
    int64_t first_off = 0, first_ts = 0, max_ts = INT64_MIN, last_off = 0;
    int have_lat, pass;
    struct obuf o = {NULL, NULL, 0, 0};
    PyObject *result = NULL;

    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "legacy_inner_to_v2() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    wmagic = PyLong_AsLong(args[1]);
    if (wmagic == -1 && PyErr_Occurred())
        return NULL;
    if (as_int64(args[2], &woffset) < 0)
        return NULL;
    have_lat = args[3] != Py_None;
    if (have_lat && as_int64(args[3], &lat) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (!crc32_ready)
        crc32_init_tables();
    buf = (const uint8_t *)view.buf;
    len = view.len;

    /* pass 0: every message checked, the count, the last relative offset, the output size;
     * pass 1: the records written */
    for (pass = 0; pass < 2; pass++) {
        p = 0;
        while (p < len) {
            int32_t size, kl, vl;
            int magic;
            int64_t off, ts, abs_off;
            Py_ssize_t msg_end, i, kpos, vpos;

            if (len - p < 12)
                goto unusual;
            size = be32(buf + p + 8);
            if (size < 14 || (Py_ssize_t)size > len - p - 12)
                goto unusual;
            msg_end = p + 12 + size;
            magic = (int8_t)buf[p + 16];
            if ((magic != 0 && magic != 1) || (buf[p + 17] & 7))
                goto unusual;
            off = be64(buf + p);
            i = p + 18;
            ts = -1;
            if (magic == 1) {
                ts = be64(buf + i);
                i += 8;
            }
            if (i + 4 > msg_end)
                goto unusual;
            kl = be32(buf + i);
            i += 4;
            kpos = i;
            if (kl > 0) {
                if (i + kl > msg_end)
                    goto unusual;
                i += kl;
            }
            if (i + 4 > msg_end)
                goto unusual;
            vl = be32(buf + i);
            i += 4;
            vpos = i;
            if (vl >= 0 && i + vl > msg_end)
                goto unusual;
            if (pass == 0) {
                if (crc32_update(0, buf + p + 16, (size_t)(msg_end - p - 16)) != be32u(buf + p + 12))
                    goto unusual;
                last_rel = off;
                n++;
                p = msg_end;
                continue;
            }
            /* pass 1: the record as iter_legacy_record_chunks yields it, then v2-encoded */
            if (wmagic == 1) {
                if (__builtin_add_overflow(base_offset, off, &abs_off))
                    goto unusual;
            }
            else
                abs_off = off;
            if (magic == 0)
                ts = -1;
            else if (have_lat)
                ts = lat;
            if (n == 0) {
                first_off = abs_off;
                first_ts = ts;
            }
            if (ts > max_ts)
                max_ts = ts;
            last_off = abs_off;
            n++;
            {
                uint64_t tsz, odz, klz = zz32((uint64_t)(int64_t)(kl < 0 ? -1 : kl));
                uint64_t vlz = zz32((uint64_t)(int64_t)(vl < 0 ? -1 : vl));
                Py_ssize_t body, kbytes = kl > 0 ? kl : 0, vbytes = vl > 0 ? vl : 0;
                char *w;
                if (zz64_diff(ts, first_ts, &tsz) < 0) {
                    PyErr_Clear();
                    goto unusual;
                }
                odz = zz32((uint64_t)abs_off - (uint64_t)first_off);
                body = 1 + uvarint_size(tsz) + uvarint_size(odz) + uvarint_size(klz) + kbytes + uvarint_size(vlz) +
                       vbytes + 1;
                w = ob_reserve(&o, body + 10);
                if (w == NULL)
                    goto fail;
                w = put_uvarint(w, zz32((uint64_t)body));
                *w++ = 0;
                w = put_uvarint(w, tsz);
                w = put_uvarint(w, odz);
                w = put_uvarint(w, klz);
                memcpy(w, buf + kpos, (size_t)kbytes);
                w += kbytes;
                w = put_uvarint(w, vlz);
                memcpy(w, buf + vpos, (size_t)vbytes);
                w += vbytes;
                *w++ = 0; /* no headers */
                o.len = w - o.p;
            }
            p = msg_end;
        }
        if (pass == 0) {
            if (n == 0)
                goto unusual;
            if (wmagic == 1 && woffset != 0) {
                if (woffset < last_rel)
                    goto unusual;
                base_offset = woffset - last_rel;
            }
            total = n;
            n = 0;
            if (ob_init(&o, len + total * 4) < 0)
                goto fail;
        }
    }
    if (have_lat)
        max_ts = lat;
    if (ob_finish(&o) == NULL) {
        o.bytes = NULL;
        goto fail;
    }
    result = Py_BuildValue("(NnLLLL)", o.bytes, total, (long long)first_off, (long long)last_off,
                           (long long)first_ts, (long long)max_ts);
    PyBuffer_Release(&view);
    return result;
unusual:
    Py_XDECREF(o.bytes);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(o.bytes);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef speedups_methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records,
     METH_FASTCALL | METH_KEYWORDS, decode_records_doc},
    {"decode_records_part", (PyCFunction)(void (*)(void))decode_records_part, METH_FASTCALL,
     decode_records_part_doc},
    {"decode_columns_v2", (PyCFunction)(void (*)(void))decode_columns_v2, METH_FASTCALL,
     decode_columns_v2_doc},
    {"format_v2_text", (PyCFunction)(void (*)(void))format_v2_text, METH_FASTCALL,
     format_v2_text_doc},
    {"v2_text_formatter", (PyCFunction)(void (*)(void))v2_text_formatter, METH_FASTCALL,
     v2_text_formatter_doc},
    {"walk_v2", (PyCFunction)(void (*)(void))walk_v2, METH_FASTCALL, walk_v2_doc},
    {"scan_v2", (PyCFunction)(void (*)(void))scan_v2, METH_FASTCALL, scan_v2_doc},
    {"scan_fd", (PyCFunction)(void (*)(void))scan_fd, METH_FASTCALL, scan_fd_doc},
    {"index_v2", (PyCFunction)(void (*)(void))index_v2, METH_FASTCALL, index_v2_doc},
    {"crc32c", (PyCFunction)(void (*)(void))py_crc32c, METH_FASTCALL | METH_KEYWORDS, crc32c_doc},
    {"_crc32c_portable", (PyCFunction)(void (*)(void))py_crc32c_portable,
     METH_FASTCALL | METH_KEYWORDS, crc32c_portable_doc},
    {"encode_v2_records", (PyCFunction)(void (*)(void))encode_v2_records, METH_FASTCALL,
     encode_v2_records_doc},
    {"encode_legacy_messages", (PyCFunction)(void (*)(void))encode_legacy_messages, METH_FASTCALL,
     encode_legacy_messages_doc},
    {"_crc32", (PyCFunction)(void (*)(void))py_crc32, METH_FASTCALL | METH_KEYWORDS, crc32_doc},
    {"decode_legacy_inner", (PyCFunction)(void (*)(void))decode_legacy_inner, METH_FASTCALL,
     decode_legacy_inner_doc},
    {"legacy_inner_to_v2", (PyCFunction)(void (*)(void))legacy_inner_to_v2, METH_FASTCALL,
     legacy_inner_to_v2_doc},
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

    crc32c_setup();

    if (PyType_Ready(&TextFormatterType) < 0)
        return NULL;

    m = PyModule_Create(&speedups_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "crc32c_hardware", crc32c_hardware) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
