"""Array backends: the one place that knows NumPy, CuPy, PyTorch and array-api-strict.

Solvers, losses and measures are written once against the Python array API standard
and receive their namespace as a required ``xp`` keyword. This module resolves that
namespace, by name (``numpy``, ``array-api-strict``, ``torch``, ``cupy``) or from input
arrays, fixes the working dtype and device, and is the only module that moves arrays
between host and device (``Backend.asarray`` / :func:`to_numpy`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np
import scipy.sparse as sp

from calopt.errors import BackendError, UnknownNameError

__all__ = ["BACKENDS", "Backend", "backend_of", "column_max_abs", "column_max_min", "column_sums", "device",
           "finite_columns", "get_backend", "is_numpy", "is_sparse", "namespace", "row_dot", "stack_rows",
           "transposed_product", "to_numpy", "unstack_rows"]

#: Names accepted by :func:`get_backend` and ``--backend``.
BACKENDS = ("numpy", "array-api-strict", "torch", "cupy")
_DTYPES = ("float64", "float32")


def is_sparse(x: Any) -> bool:
    """Whether ``x`` is a scipy.sparse matrix or array (kept sparse on NumPy)."""
    return hasattr(x, "tocsr") and hasattr(x, "nnz")


def column_max_abs(X: Any) -> np.ndarray:
    """Each column's largest absolute value of scipy.sparse or dense NumPy rows ``X``, float64 (d,)
    (0 for a column with no stored entry; NaN where one is NaN), without an ``abs`` copy of X.

    Sparse: one unbuffered reduction over the stored values, where scipy's
    ``abs(X).max(axis=0)`` copies them and sorts them by column first (0.23 s against 0.02 s at
    2,000 × 100,000 with 2·10⁶ entries); duplicate entries are summed first, as scipy does.
    Dense: max(max x, −min x) by :func:`column_max_min`."""
    if not sp.issparse(X):
        if X.shape[0] == 0:
            return np.zeros(X.shape[1])
        high, low = column_max_min(X)
        return np.maximum(high, -low).astype(np.float64)
    X = X.tocsr()
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    largest = np.zeros(X.shape[1])
    with np.errstate(invalid="ignore"):  # a NaN is kept, not warned of: the callers check finiteness
        np.maximum.at(largest, X.indices, np.abs(X.data, dtype=np.float64))
    return largest


#: Rows folded into one wide row by :func:`column_max_min`.
FOLD_ROWS = 32


def column_max_min(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's max and min of dense NumPy rows (at least one). A C-contiguous X is reduced as
    a view of ``FOLD_ROWS`` rows to a row (a few long inner loops instead of one short loop per
    row; 10⁷ × 100 float32: 0.9 s against 1.3 s), then the folded columns; exact, and a NaN still
    shows."""
    rows, d = X.shape
    folded = (rows // FOLD_ROWS) * FOLD_ROWS
    if not X.flags.c_contiguous or folded == 0 or d == 0:
        return X.max(axis=0), X.min(axis=0)
    wide = X[:folded].reshape(folded // FOLD_ROWS, FOLD_ROWS * d)
    high, low = wide.max(axis=0).reshape(FOLD_ROWS, d).max(axis=0), wide.min(axis=0).reshape(FOLD_ROWS, d).min(axis=0)
    if folded < rows:
        high, low = np.maximum(high, X[folded:].max(axis=0)), np.minimum(low, X[folded:].min(axis=0))
    return high, low


def namespace(*arrays: Any) -> Any:
    """The array-API namespace of ``arrays`` (for plugin code that holds arrays but no ``xp``)."""
    return array_api_compat.array_namespace(*arrays)


def device(x: Any) -> Any:
    """The device ``x`` lives on, to create constants beside it (``xp.asarray(c, device=device(x))``)."""
    return array_api_compat.device(x)


def is_numpy(xp: Any) -> bool:
    """Whether ``xp`` is NumPy's namespace (host code may then take shortcuts, such as Python floats)."""
    return array_api_compat.is_numpy_namespace(xp)


def row_dot(a: Any, c: Any, xp: Any) -> Any:
    """The inner products of ``a`` and ``c`` over their last axis (the array API's ``vecdot``).

    On NumPy through ``einsum``, not BLAS: ``vecdot`` of a few stacked vectors calls a
    multithreaded BLAS ``dot`` per row, and on a machine with more busy threads than cores each
    call waits for its threads to be scheduled (the L-BFGS recursion, 40 such calls a pass,
    took 131 of 146 s on a 1,000 × 20,000 sparse set at load 9, 0.3 s with ``einsum``).
    """
    if is_numpy(xp):
        return np.einsum("...i,...i->...", a, c)
    return xp.vecdot(a, c, axis=-1)


def column_sums(a: Any, xp: Any) -> Any:
    """``xp.sum(a, axis=0)``. For a C-ordered 2-D NumPy array through ``einsum``: NumPy's sum over
    the first axis of such an array adds row after row, as ``einsum`` does, so the same bits
    (tests/test_row_dot.py), about 3× faster at a few columns (14 against 40 µs at 2,100 × 6,
    the L-BFGS pass's loss and intercept sums of stacked text models)."""
    if type(a) is np.ndarray and a.ndim == 2 and a.flags.c_contiguous:
        return np.einsum("ij->j", a)
    return xp.sum(a, axis=0)


def finite_columns(w: Any, xp: Any) -> Any:
    """Whether every entry of each column of ``w`` (d, M) is finite, (M,). On NumPy through a
    model-major copy: a reduction over the first axis of a (d, M) array runs an inner loop of M
    values d times (88 against 24 µs at 4,197 × 6)."""
    if type(w) is np.ndarray and w.ndim == 2:
        return np.isfinite(np.ascontiguousarray(w.T)).all(axis=1)
    return xp.all(xp.isfinite(w), axis=0)


def stack_rows(w: Any, b: Any, xp: Any) -> Any:
    """Stacked models' weights w (d, M) and intercepts b (M,) as one row each, (M, d + 1).

    On NumPy C-ordered whatever w's layout (``concat`` of a transposed w keeps its Fortran
    order, and then every per-model inner product and maximum over a row of the L-BFGS
    state reads it with a stride: the max |∇f| of 6 text models took 150 µs instead of 15)."""
    if is_numpy(xp):
        z = np.empty((w.shape[1], w.shape[0] + 1), dtype=np.result_type(w, b))
        z[:, :-1] = w.T
        z[:, -1] = b
        return z
    return xp.concat([w.T, b[:, None]], axis=1)


def unstack_rows(z: Any, xp: Any) -> tuple[Any, Any]:
    """The w (d, M) and b (M,) of :func:`stack_rows`'s z; on NumPy w is C-ordered (a sparse
    product's loop reads w that way: a strided view costs it a slow copy each product)."""
    w, b = z[:, :-1].T, z[:, -1]
    return (np.ascontiguousarray(w), b) if is_numpy(xp) else (w, b)


def transposed_product(X: Any, coef: Any) -> Any:
    """``X.T @ coef``, the gradient's product, (d, M) for rows X (n, d) and ``coef`` (n, M).

    For a dense NumPy X and a 2-D ``coef`` as ``(coef.T @ X).T``: OpenBLAS's product with the
    small operand transposed runs 1.5-3.5 times faster (6 against 13-15 ms at 2,000 × 2,000 and
    18 models, 16 against 24 ms at 100,000 × 100 and 6). It mostly sums each entry over the rows
    in the same order, but not always: one of three wide dense models tried moved in its last
    bits (one BLAS thread, 301 rows), while every test value of the wide benchmark's 546 cells
    (split 0) and of the wide dense development half's 24 stayed the same. Anything else
    (sparse rows, a vector, other namespaces, a reader's own row types): ``X.T @ coef``.
    """
    if type(X) is np.ndarray and type(coef) is np.ndarray and X.ndim == 2 and coef.ndim == 2:
        return (coef.T @ X).T
    return X.T @ coef


def lbfgs_direction(g: Any, s: Any, y: Any, rho: Any, order: list[int], newest: int, xp: Any) -> Any:
    """−H·∇f by L-BFGS's two-loop recursion (Nocedal & Wright, *Numerical Optimization*,
    Algorithm 7.4) for one model or many stacked ones: ``g`` (..., p), the memory's slots on the
    first axis of ``s``, ``y`` (slots, ..., p) and ``rho`` (slots, ...) = 1/yᵀs (0: an empty slot,
    which acts as none), ``order`` the slots to use, oldest first, and ``newest`` the slot whose
    pair scales the initial matrix (γ = sᵀy/yᵀy; without a pair the steepest descent direction,
    scaled down to unit length where it is longer: scaled up as well, as SciPy's first step is, it
    did worse on the wide benchmark's development half, 0.869 within 0.01 against 0.881). The
    lbfgs algorithm's step and the K-class rule's fold models both use it; inner products by :func:`row_dot`. On NumPy, one model (``g`` 1-D) takes
    :func:`_lbfgs_direction_one` and stacked ones :func:`_lbfgs_direction_stacked`: the same
    operations (the same bits), on NumPy scalars and in place respectively."""
    if is_numpy(xp):
        return (_lbfgs_direction_one if g.ndim == 1 else _lbfgs_direction_stacked)(g, s, y, rho, order, newest)

    def dot(a: Any, c: Any) -> Any:
        return row_dot(a, c, xp)

    q, alphas = g, []
    for i in reversed(order):  # newest first
        alpha = rho[i, ...] * dot(s[i, ...], q)
        q = q - alpha[..., None] * y[i, ...]
        alphas.append(alpha)
    has_pair = rho[newest, ...] > 0
    newest_yy = dot(y[newest, ...], y[newest, ...])
    one = xp.ones_like(newest_yy)  # a per-model 1
    newest_sy = 1 / xp.where(has_pair, rho[newest, ...], one)
    norm = xp.sqrt(dot(g, g))
    gamma = xp.where(has_pair, newest_sy / xp.where(newest_yy > 0, newest_yy, one), 1 / xp.maximum(norm, one))
    r = gamma[..., None] * q
    for i, alpha in zip(order, reversed(alphas)):  # oldest first
        r = r + s[i, ...] * (alpha - rho[i, ...] * dot(y[i, ...], r))[..., None]
    return -r


def _lbfgs_direction_stacked(g: np.ndarray, s: np.ndarray, y: np.ndarray, rho: np.ndarray, order: list[int],
                             newest: int) -> np.ndarray:
    """:func:`lbfgs_direction` of stacked models on NumPy: the same operations in the same order
    on arrays of the same memory layout (``einsum``'s sums depend on it; ``g`` can be a
    transposed view), so the same bits, with the vector updates in place in two buffers.
    Each slot's ``q − α·y`` otherwise makes two arrays of the models' size: at 6 models ×
    7,000 text columns the fresh arrays' traffic was a third of the recursion's time."""
    dot = np.einsum
    q, term, alphas = g, np.empty(g.shape, dtype=np.result_type(g, s, y, rho)), []
    for i in reversed(order):  # newest first
        alpha = rho[i] * dot("...i,...i->...", s[i], q)
        np.multiply(alpha[:, None], y[i], out=term)
        q = q - term if q is g else np.subtract(q, term, out=q)  # g is the caller's: a new (C-order) q
        alphas.append(alpha)
    has_pair = rho[newest] > 0
    newest_yy = dot("...i,...i->...", y[newest], y[newest])
    one = np.ones_like(newest_yy)
    newest_sy = 1 / np.where(has_pair, rho[newest], one)
    norm = np.sqrt(dot("...i,...i->...", g, g))
    gamma = np.where(has_pair, newest_sy / np.where(newest_yy > 0, newest_yy, one), 1 / np.maximum(norm, one))
    r = gamma[:, None] * q if q is g else np.multiply(gamma[:, None], q, out=q)
    for i, alpha in zip(order, reversed(alphas)):  # oldest first
        np.multiply(s[i], (alpha - rho[i] * dot("...i,...i->...", y[i], r))[:, None], out=term)
        r += term
    return np.negative(r, out=r)


def _lbfgs_direction_one(g: np.ndarray, s: np.ndarray, y: np.ndarray, rho: np.ndarray, order: list[int],
                         newest: int) -> np.ndarray:
    """:func:`lbfgs_direction` of one model on NumPy, its per-model numbers NumPy scalars instead of
    0-d arrays (the same operations, so the same bits; 55 against 94 µs at 50 parameters, where
    the recursion's cost is its calls: the K-class model on a few hundred rows)."""
    dot = np.einsum
    q, alphas = g, []
    for i in reversed(order):  # newest first
        alpha = rho[i] * dot("i,i->", s[i], q)
        q = q - alpha * y[i]
        alphas.append(alpha)
    if rho[newest] > 0:
        newest_yy = dot("i,i->", y[newest], y[newest])
        gamma = (1 / rho[newest]) / (newest_yy if newest_yy > 0 else 1.0)
    else:
        gamma = 1 / np.maximum(np.sqrt(dot("i,i->", g, g)), 1.0)
    r = gamma * q
    for i, alpha in zip(order, reversed(alphas)):  # oldest first
        r = r + s[i] * (alpha - rho[i] * dot("i,i->", y[i], r))
    return -r


def put_slot(memory: Any, slot: int, new: Any, xp: Any) -> Any:
    """``memory`` (slots on the first axis) with slot ``slot`` replaced by ``new``.

    On NumPy in place (the caller gives up the old contents): no new array a pass, so no fresh
    pages to fault in (L-BFGS's (10, 18, d) memories at d = 100,000 are 144 MB each)."""
    if is_numpy(xp):
        memory[slot, ...] = new
        return memory
    return xp.concat([memory[:slot, ...], new[None, ...], memory[slot + 1:, ...]], axis=0)


def put_slot_where(memory: Any, slot: int, new: Any, where: Any, xp: Any) -> Any:
    """For a ring of slots whose oldest is ``slot`` and which moves on by one: the models
    (``memory``'s second axis) where ``where`` holds get ``new`` in place of their oldest pair;
    the others keep every pair in the same order from the ring's new start, so their slots
    move on by one with it (``roll``).

    On NumPy in place, moving only the models that keep their pairs, slot by slot (a gather,
    ``roll`` and scatter of those models' whole rings cost 4-15× more on text: 0.3 ms a pass
    at 6 models × 4,000 columns, where some model halves its step on a third of the passes)."""
    if is_numpy(xp):
        keep, chosen = np.flatnonzero(~where), np.flatnonzero(where)
        for j in keep.tolist():
            ring = memory[:, j]
            last = ring[-1].copy()
            for i in range(ring.shape[0] - 1, 0, -1):
                ring[i] = ring[i - 1]
            ring[0] = last
        if chosen.size:
            memory[slot, chosen] = new[chosen]
        return memory
    mask = xp.reshape(where, (1, *where.shape, *(1,) * (memory.ndim - 1 - where.ndim)))
    return xp.where(mask, put_slot(memory, slot, new, xp), xp.roll(memory, 1, axis=0))


#: The optional array libraries: backend name → (module, what to install when it is missing).
_OPTIONAL = {
    "array-api-strict": ("array_api_strict", "the array-api-strict package: pip install array-api-strict"),
    "torch": ("torch", "PyTorch: pip install torch"),
    "cupy": ("cupy", "CuPy and an NVIDIA GPU: pip install 'calopt[cuda12]' (or calopt[cuda13] for CUDA 13)"),
}


def _import_library(name: str) -> Any:
    """The module of the optional array library behind backend ``name``; a BackendError saying
    what to install when it is missing."""
    module, needs = _OPTIONAL[name]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BackendError(f"backend {name!r} needs {needs}") from None


def _check_gpu(cupy: Any) -> None:
    """CuPy imports without a GPU; training needs one."""
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError, driver missing, ...
        raise BackendError(f"backend 'cupy': no usable CUDA GPU ({exc})") from None
    if count == 0:
        raise BackendError("backend 'cupy': CuPy is installed but no CUDA GPU is visible")


def _import_namespace(name: str) -> Any:
    """Import the array library called ``name`` and return its standard namespace."""
    if name == "numpy":
        return array_api_compat.array_namespace(np.empty(0))
    if name not in _OPTIONAL:
        raise UnknownNameError("backend", name, BACKENDS)
    library = _import_library(name)
    if name == "array-api-strict":  # the standard namespace itself
        return library
    if name == "cupy":
        _check_gpu(library)
    return array_api_compat.array_namespace(library.empty(0))


def _backend_name(xp: Any) -> str:
    if array_api_compat.is_numpy_namespace(xp):
        return "numpy"
    if array_api_compat.is_cupy_namespace(xp):
        return "cupy"
    if array_api_compat.is_torch_namespace(xp):
        return "torch"
    if array_api_compat.is_array_api_strict_namespace(xp):
        return "array-api-strict"
    return getattr(xp, "__name__", "unknown")


def _resolve_device(name: str, xp: Any, device: Any) -> Any:
    """Turn a user's device spec (``None``, ``0``, ``"cuda:1"``, ``"cpu"``) into a device."""
    if device is None or not isinstance(device, (str, int)):
        return device
    if name == "cupy":
        import cupy

        index = int(str(device).removeprefix("cuda:").removeprefix("gpu:"))
        if not 0 <= index < cupy.cuda.runtime.getDeviceCount():
            raise BackendError(f"backend 'cupy': no GPU with index {index}")
        return cupy.cuda.Device(index)
    if name == "torch":
        import torch

        return torch.device(device if isinstance(device, str) else f"cuda:{device}")
    if name == "array-api-strict":
        return xp.Device(str(device)) if str(device) != "cpu" else xp.Device("CPU_DEVICE")
    if str(device) != "cpu":
        raise BackendError(f"backend {name!r} runs on the CPU only, not on {device!r}")
    return "cpu"


@dataclass(frozen=True)
class Backend:
    """A resolved array backend: namespace, working float dtype and device.

    Internal functions receive ``backend.xp`` as their ``xp`` keyword; data enters
    through :meth:`asarray` once, at the public boundary.
    """

    name: str
    xp: Any
    dtype: Any
    device: Any = None

    @property
    def dtype_name(self) -> str:
        """``"float32"`` or ``"float64"``."""
        return "float32" if self.dtype == self.xp.float32 else "float64"

    def asarray(self, x: Any, *, dtype: Any = None) -> Any:
        """Move ``x`` (a NumPy array, scipy.sparse matrix, list or scalar) onto this backend.

        Sparse matrices are densified here; solvers that keep data sparse do so on
        the NumPy backend before reaching this point.
        """
        if is_sparse(x):
            x = x.toarray()
        if (
            array_api_compat.is_array_api_obj(x)
            and not array_api_compat.is_numpy_array(x)
            and array_api_compat.array_namespace(x) is not self.xp
        ):
            x = to_numpy(x)  # from another library: go through the host once
        return self.xp.asarray(x, dtype=self.dtype if dtype is None else dtype, device=self.device)

    def to_numpy(self, x: Any) -> np.ndarray:
        """Copy ``x`` to a host NumPy array."""
        return to_numpy(x)


def get_backend(name: str = "numpy", *, dtype: str = "float64", device: Any = None) -> Backend:
    """Resolve a backend by name, with its working float ``dtype`` and ``device``.

    Raises :class:`~calopt.errors.UnknownNameError` for an unknown name and
    :class:`~calopt.errors.BackendError` when the library or a GPU is missing.
    """
    if dtype not in _DTYPES:
        raise UnknownNameError("dtype", str(dtype), _DTYPES)
    xp = _import_namespace(name)
    return Backend(name, xp, getattr(xp, dtype), _resolve_device(name, xp, device))


def backend_of(*arrays: Any, dtype: str | None = None) -> Backend:
    """The backend of the given arrays (NumPy for lists, scalars and scipy.sparse).

    The working dtype is the arrays' floating dtype (float32 stays float32), else
    ``dtype``, else float64. Arrays on different devices are an error.
    """
    arrays = [a for a in arrays if a is not None and array_api_compat.is_array_api_obj(a)]
    arrays = [a for a in arrays if not is_sparse(a)]
    if not arrays:
        return get_backend("numpy", dtype=dtype or "float64")
    try:
        xp = array_api_compat.array_namespace(*arrays)
    except TypeError as exc:
        raise BackendError(f"inputs come from different array libraries: {exc}") from None
    try:
        device = array_api_compat.device(arrays[0])
        for other in arrays[1:]:
            if array_api_compat.device(other) != device:
                raise BackendError(
                    f"inputs are on different devices: {device} and {array_api_compat.device(other)}"
                )
    except BackendError:
        raise
    name = _backend_name(xp)
    if dtype is None:
        floating = [a.dtype for a in arrays if xp.isdtype(a.dtype, "real floating")]
        dtype_obj = floating[0] if floating else xp.float64
    else:
        dtype_obj = getattr(xp, dtype)
    return Backend(name, xp, dtype_obj, device)


def to_numpy(x: Any) -> np.ndarray:
    """Copy an array of any supported library to a host NumPy array (the one exit)."""
    if isinstance(x, np.ndarray):
        return x
    if array_api_compat.is_cupy_array(x):
        return x.get()
    if array_api_compat.is_torch_array(x):
        return x.detach().cpu().numpy()
    if array_api_compat.is_array_api_obj(x):
        try:
            return np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError, AttributeError):
            return np.asarray(x)
    return np.asarray(x)
