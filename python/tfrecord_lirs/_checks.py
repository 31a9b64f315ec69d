"""The argument checks and error translation the Python front ends share, without
TensorFlow: the Rust core decides every rule and error (through the extension,
`tfrecord_lirs._lirs`); this module only translates: ValueError for the argument checks,
and, once TensorFlow is loaded in the process, the extension's exceptions
(`tfrecord_lirs.errors`) as exceptions that are also of the matching tf.errors class.
"""

import os
import sys

from tfrecord_lirs import _lirs, errors

# Each kind of the core's errors: its tfrecord_lirs.errors class and the name of the
# tf.errors class TensorFlow code catches, the same name (the core's table).
_TF_ERRORS = {getattr(errors, name): name for _kind, name in _lirs.error_classes()}
# A wrong type is an InvalidArgument of the core's too.
_TF_ERRORS[errors.ArgumentTypeError] = _TF_ERRORS[errors.InvalidArgumentError]
_AS_TF = {}
# Every default, by argument name (the core's table, `_lirs.defaults()`).
DEFAULTS = _lirs.defaults()


def or_default(value, name):
    """`value`, or the core's default for argument `name` when it is None: for the
    TensorFlow op, whose attrs and inputs take concrete values."""
    return DEFAULTS[name] if value is None else value


def _both(lirs_class, tf_class):
    """An exception class that is both `tf_class` and `lirs_class`."""
    return type(lirs_class.__name__, (tf_class, lirs_class), {
        "__module__": "tfrecord_lirs.errors",
        "__doc__": f"{lirs_class.__doc__}\n\nAlso a {tf_class.__module__}.{tf_class.__name__}.",
    })


def _as_tf(lirs_class):
    """The class that is both `lirs_class` and its tf.errors class, when TensorFlow is
    loaded in this process (None otherwise: nothing catches tf.errors then)."""
    tf = sys.modules.get("tensorflow")
    name = _TF_ERRORS.get(lirs_class)
    if tf is None or name is None:
        return None
    if lirs_class not in _AS_TF:
        _AS_TF[lirs_class] = _both(lirs_class, getattr(tf.errors, name))
    return _AS_TF[lirs_class]


def call_core(fn, *args):
    """Calls the extension's `fn`; with TensorFlow loaded, its error (a
    tfrecord_lirs.errors class) is re-raised as one that is also the matching
    tf.errors class, with the same message and `file`, `instance`, `offset`."""
    try:
        return fn(*args)
    except errors.LIRSError as e:
        both = _as_tf(type(e))
        if both is None:
            raise
        raised = both(None, None, str(e))
        raised.file, raised.instance, raised.offset = e.file, e.instance, e.offset
        raise raised from None


def check(fn, *args):
    """Calls one of the extension's argument checks; raises the core's
    `tfrecord_lirs.errors.InvalidArgumentError` (a ValueError, and with TensorFlow
    loaded also a tf.errors.InvalidArgumentError) with the core's message."""
    return call_core(fn, *args)


def check_argument(name, value):
    """Checks that `value` has the type argument `name` takes (the core's rule): a
    wrong type raises `tfrecord_lirs.errors.ArgumentTypeError` (both a TypeError and
    the InvalidArgumentError that is a ValueError) with the core's message."""
    check(_lirs.check_argument, name, value)
    return value


def check_backend(backend):
    check(_lirs.check_backend, backend)
    return backend


def check_fit(fit):
    check(_lirs.check_fit, fit)
    return fit


def check_compression_type(compression_type):
    """ValueError (with the core's text) unless LIRSDataset can take it; None is ""."""
    check(_lirs.check_compression_type, "" if compression_type is None else compression_type)


def check_page_size(page_size):
    """ValueError (with the core's text) unless `page_size` is a valid page size."""
    check(_lirs.check_page_size, page_size)
    return page_size


def check_shard(num_shards, shard_index):
    """Checks the pair; either may be None (not known yet, e.g. a tensor). True when
    it asks for the worker's shard under tf.data's HINT sharding (SHARD_HINT)."""
    return check(_lirs.check_shard, num_shards, shard_index)


def default_table_path(path):
    """The offset table used for data file `path` when none is given (a str)."""
    return os.fsdecode(_lirs.default_table_path(path_str(path)))


def path_str(path):
    """`path` (str, bytes or PathLike) as the str the extension takes (os.fsdecode)."""
    return os.fsdecode(os.fspath(path))


def check_dataset_arguments(batch_size, num_parallel_reads, files, tables):
    """Checks LIRSDataset's arguments (None: not given / not known yet); ValueError
    with the core's text."""
    check(_lirs.check_dataset_arguments, batch_size, num_parallel_reads, files, tables)
