"""Where JAX's experimental HiJAX primitive API stands for this op (see the
README): the example's product as a jax.experimental.hijax.HiPrim, checked against
the float64 oracle. When a JAX release changes HiJAX, this tells you how."""

import jax
import jax.numpy as jnp
import pytest
from jax import export
from jax.experimental import hijax
from jax.interpreters import batching

from compare import assert_close
from op_spec import GRADIENTS, VALUES, matvec_f64, matvec_vjp_f64

if not hasattr(hijax, "HiPrim"):  # JAX 0.10: HiPrimitive, an earlier API
    pytest.skip("HiJAX's HiPrim needs JAX 0.11 or newer", allow_module_level=True)


def _shift_down(v):
    return jnp.pad(v[..., :-1], [(0, 0)] * (v.ndim - 1) + [(1, 0)])


def _shift_up(v):
    return jnp.pad(v[..., 1:], [(0, 0)] * (v.ndim - 1) + [(0, 1)])


class BandProduct(hijax.HiPrim):
    def __init__(self, aval, *, with_transpose=True):
        self.in_avals = (aval,) * 4
        self.out_aval = aval
        self.params = {"with_transpose": with_transpose}
        super().__init__()

    def expand(self, dl, d, du, x):
        return dl * _shift_down(x) + d * x + du * _shift_up(x)

    # Reverse mode derived from the JVP and the transpose below.
    vjp_fwd, vjp_bwd_retval = hijax.vjp_from_jvp

    def jvp(self, primals, tangents):
        dl, d, du, x = primals
        tdl, td, tdu, tx = (hijax.instantiate_zeros(t) for t in tangents)
        return self(*primals), self(tdl, td, tdu, x) + self(dl, d, du, tx)

    def transpose(self, ct, dl, d, du, x):
        if not self.with_transpose:
            return super().transpose(ct, dl, d, du, x)
        # Undefined (linear) inputs arrive as accumulators, the others as values.
        # Each JVP term is linear in x or in the bands, never both.
        if isinstance(x, hijax.GradAccum):
            x.accum(self(_shift_down(du), d, _shift_up(dl), ct))
            return None
        for band, ct_band in ((dl, ct * _shift_down(x)), (d, ct * x), (du, ct * _shift_up(x))):
            if isinstance(band, hijax.GradAccum):
                band.accum(ct_band)
        return None

    def batch(self, axis_data, args, dims):
        # hijax.bdims_at_front (JAX 0.12 on) does this; JAX 0.11 lacks it.
        size, mesh_axis = axis_data.size, axis_data.explicit_mesh_axis
        moved = [
            batching.bdim_at_front(a, b, size, mesh_axis) for a, b in zip(args, dims, strict=True)
        ]
        return BandProduct(jax.typeof(moved[3]), **self.params)(*moved), 0


def hijax_matvec(dl, d, du, x, with_transpose=True):
    return BandProduct(jax.typeof(x), with_transpose=with_transpose)(dl, d, du, x)


def operands(rng, shape):
    return [jnp.asarray(rng.standard_normal(shape), jnp.float64) for _ in range(4)]


def test_hijax_primitive_jit_vmap_export(rng):
    args = operands(rng, (4, 9))
    want = matvec_f64(*args)
    assert_close(jax.jit(hijax_matvec)(*args), want, VALUES)
    mapped = jax.vmap(hijax_matvec, in_axes=(None, None, None, 0))(
        *(a[0] for a in args[:3]), args[3]
    )
    assert_close(mapped, matvec_f64(*(a[:1] for a in args[:3]), args[3]), VALUES)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    loaded = export.deserialize(export.export(jax.jit(hijax_matvec))(*specs).serialize())
    assert_close(loaded.call(*args), want, VALUES)


def test_hijax_primitive_gradient_through_its_transpose(rng):
    args = operands(rng, (4, 9))
    ct = operands(rng, (4, 9))[0]
    got = jax.jit(jax.grad(lambda *a: jnp.sum(ct * hijax_matvec(*a)), argnums=(0, 1, 2, 3)))(*args)
    for g, w in zip(got, matvec_vjp_f64(*args, ct), strict=True):
        assert_close(g, w, GRADIENTS)


def test_hijax_grad_needs_a_transpose_method(rng):
    args = operands(rng, (4, 9))
    with pytest.raises(NotImplementedError, match="must implement `transpose`"):
        jax.grad(lambda x: jnp.sum(hijax_matvec(*args[:3], x, with_transpose=False)))(args[3])
