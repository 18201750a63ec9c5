"""Per-iteration time of a data-parallel training job on any GPU placement, fitted from short
profiling runs on one and two nodes. Chronus profiles every new job this way, but its released
artifact has no such formula (it schedules with the trace's true durations).

The model, for one iteration on ``g`` GPUs spread over ``k`` nodes with at most ``m`` on a node::

    t = overhead + compute · w(g) + intra · 2(m-1)/m + inter · h(k)

``compute``   forward + backward time of one GPU at the full per-GPU batch [s].
``w(g)``      the share of that batch each GPU still processes. 1 under *weak scaling* (per-GPU
              batch fixed: the usual data-parallel setup), ``min(1, cap/g)`` when the global
              batch stops growing at ``cap`` GPUs (*strong scaling* beyond ``cap``, as in the
              artifact's ``stats/`` ImageNet runs: flat up to 4 GPUs, then 1/g).
``overhead``  per-iteration time that does not shrink with the per-GPU batch (optimizer step,
              kernel launches, input pipeline) [s]. Indistinguishable from ``compute`` under weak
              scaling, so it is only fitted in the capped regime and is 0 otherwise.
``intra``     gradient size over intra-node bandwidth, S/B_intra [s]: a ring all-reduce among the
              ``m`` GPUs of a node pushes 2(m-1)/m · S through each GPU's link (0 for one GPU).
``inter``     network cost of a job on two nodes [s], growing with ``h(k)``: ``k - 1`` ("linear":
              every extra node adds a synchronisation hop), ``2(k-1)/k`` ("ring": bandwidth-bound
              hierarchical ring all-reduce), or a mix ``w·(k-1) + (1-w)·2(k-1)/k`` with a linear
              weight ``w`` in [0, 1]. All give ``h(1) = 0, h(2) = 1``, so 1- and 2-node
              profiles cannot tell them apart; they differ only when extrapolating to 3+ nodes.
              How all-reduce grows is a property of the cluster's network, not of the model, so
              :func:`learn_beyond` learns ``w`` from the larger runs a cluster has observed,
              with a calibrated band for predictions past the profiled nodes.
              "linear" is the default because the artifact's only 4-node measurements
              (``model_info.json``) grow about 3× from 2 to 4 nodes (median of its ten
              4-node entries), not 1.5×; ElasticFlow's A100 tables grow far less (a learned
              ``w`` near 0.3) — see ``benchmarks/profiler_accuracy.py`` for the comparison.

Predictions keep communication monotone in GPUs and nodes (see :func:`iteration_seconds`):
spreading the same GPUs over more nodes, or adding GPUs under weak scaling, never predicts a
faster iteration.

All coefficients are non-negative (a physical time) and fitted by weighted non-negative least
squares on *relative* residuals, each sample weighted by the square root of its iteration count
(the standard error of its median). The band is ``t·(1 ± z·σ)`` where ``σ`` combines the spread
of single iterations (``iteration_cv_``) with the model's own leave-one-out error (``model_cv_``);
``runtime`` averages the per-iteration spread over the iterations but not the model error.
Past the profiled nodes the band widens (see ``Profile._band``): by the gap between the
"linear" and "ring" shapes, or, learned from the cluster's larger runs, by the errors it
measured there.

``NotFittedError`` is a programming error (predicting before fitting), not bad input, so it is
*not* a :class:`~chronus_py.errors.ChronusError`: it subclasses ``ValueError`` and
``AttributeError`` like scikit-learn's, and the CLI never shows it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from statistics import NormalDist

import numpy as np

from chronus_py.errors import InputError
from chronus_py.samples import Samples, packed, placement_counts, spread

INTER_NODE_SHAPES = ("linear", "ring")
InterNode = str | float
""""linear", "ring", or the weight of the linear shape in a mix of the two (1 = linear)."""
LEARN_GRID = np.linspace(0.0, 1.0, 101)


def linear_weight(inter_node: InterNode | np.ndarray) -> float | np.ndarray:
    """The weight of the linear shape: 1 for "linear", 0 for "ring", else the number given (or
    an array of weights, to evaluate many shapes at once)."""
    if isinstance(inter_node, str):
        return {"linear": 1.0, "ring": 0.0}[inter_node]
    return inter_node if isinstance(inter_node, np.ndarray) else float(inter_node)


def hops(nodes: int, inter_node: InterNode | np.ndarray) -> float | np.ndarray:
    """``h(k)``: how many two-node inter-node costs a job on ``nodes`` nodes pays (one per
    weight, given an array of weights)."""
    w = linear_weight(inter_node)
    return w * (nodes - 1.0) + (1.0 - w) * 2.0 * (nodes - 1) / nodes


PROFILE_FORMAT = "chronus-profile/1"


class NotFittedError(ValueError, AttributeError):
    """``predict``/``runtime``/``to_dict`` called on a Profile that has not been fitted."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """Predicted seconds per iteration and its band (as ``chronus profile predict`` prints)."""

    iteration_seconds: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class RuntimeEstimate:
    """Predicted seconds for a number of iterations, and its band."""

    seconds: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class Observation:
    """Summary of the samples on one placement: what fitting needs, and what profile.json keeps."""

    placement: tuple[int, ...]
    iterations: int
    median: float
    mean: float
    std: float


@dataclass(frozen=True, slots=True)
class Coefficients:
    """The fitted physical parameters of the model (seconds, except ``batch_cap_gpus``)."""

    compute: float
    overhead: float
    intra: float
    inter: float
    batch_cap_gpus: int | None


def summarise(samples: Samples) -> list[Observation]:
    """One :class:`Observation` per placement (samples on the same placement are pooled)."""
    pooled: dict[tuple[int, ...], list[np.ndarray]] = {}
    for s in samples:
        pooled.setdefault(s.placement, []).append(s.seconds)
    rows = []
    for placement, arrays in pooled.items():
        x = np.concatenate(arrays)
        rows.append(
            Observation(
                placement, int(x.size), float(np.median(x)), float(x.mean()), float(x.std())
            )
        )
    return rows


def merge(old: Observation, new: Observation) -> Observation:
    """Pool two summaries of one placement, weighting by iteration count (median approximated
    by the weighted mean of medians; std from within- and between-summary variance, where a
    std of 0 — totals only, spread unknown — takes the other summary's relative spread)."""
    if old.std == 0 or new.std == 0:  # 0 means "spread unknown": borrow the other's relative spread
        cv = max(old.std / old.mean, new.std / new.mean)
        old = replace(old, std=old.std or cv * old.mean)
        new = replace(new, std=new.std or cv * new.mean)
    n = old.iterations + new.iterations
    a, b = old.iterations / n, new.iterations / n
    mean = a * old.mean + b * new.mean
    var = a * (old.std**2 + (old.mean - mean) ** 2) + b * (new.std**2 + (new.mean - mean) ** 2)
    return Observation(old.placement, n, a * old.median + b * new.median, mean, math.sqrt(var))


def features(placement: Sequence[int], batch_cap: int | None, inter_node: InterNode) -> np.ndarray:
    """The model's regressors for one placement: [compute, overhead, intra, inter]."""
    g, k, m = sum(placement), len(placement), max(placement)
    share = 1.0 if batch_cap is None else min(1.0, batch_cap / g)
    return np.array(
        [share, 1.0 if batch_cap is not None else 0.0, 2.0 * (m - 1) / m, hops(k, inter_node)]
    )


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a handful of columns, exactly: the optimum is the
    unconstrained least-squares solution on its own support, so try every support and keep the
    best non-negative one. 2^4 tiny solves; no scipy needed."""
    best, best_sse = np.zeros(a.shape[1]), float(b @ b)
    for size in range(1, a.shape[1] + 1):
        for cols in itertools.combinations(range(a.shape[1]), size):
            x_sub, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
            if np.any(x_sub < 0):
                continue
            x = np.zeros(a.shape[1])
            x[list(cols)] = x_sub
            r = a @ x - b
            sse = float(r @ r)
            if sse < best_sse - 1e-15 * max(1.0, best_sse):
                best, best_sse = x, sse
    return best


def fit_coefficients(
    rows: Sequence[Observation], batch_cap: int | None, inter_node: InterNode
) -> tuple[Coefficients, float]:
    """Weighted NNLS fit of the model to the rows' medians for one regime.

    Returns the coefficients and the weighted RMS of the relative residuals."""
    a = np.array([features(r.placement, batch_cap, inter_node) for r in rows])
    y = np.array([r.median for r in rows])
    w = np.sqrt([r.iterations for r in rows]) / y  # relative error, ∝ 1/standard error
    x = nnls(a * w[:, None], y * w)
    rel = (a @ x - y) / y
    weights = w**2 * y**2
    rms = float(math.sqrt(np.sum(weights * rel**2) / np.sum(weights)))
    return Coefficients(*(float(v) for v in x), batch_cap_gpus=batch_cap), rms


def predict_seconds(coef: Coefficients, placement: Sequence[int], inter_node: InterNode) -> float:
    """The model's per-iteration time for a placement (GPUs per node)."""
    x = np.array([coef.compute, coef.overhead, coef.intra, coef.inter])
    return float(features(placement, coef.batch_cap_gpus, inter_node) @ x)


def _ring_seconds(
    coef: Coefficients, gpus_on_busiest_node: int, nodes: int, inter_node: InterNode | np.ndarray
) -> float | np.ndarray:
    m = gpus_on_busiest_node
    return coef.intra * 2.0 * (m - 1) / m + coef.inter * hops(nodes, inter_node)


def iteration_seconds(
    coef: Coefficients,
    placement: Sequence[int],
    inter_node: InterNode | np.ndarray,
    gpus_per_node: int,
) -> float | np.ndarray:
    """Predicted seconds per iteration, with communication monotone in GPUs and nodes.

    Physics: a longer ring or one more network crossing cannot speed up an all-reduce. The raw
    model could say otherwise when the fitted inter-node cost is below the intra-node one
    (thinner nodes shrink the intra term, and some profiles show no network cost at all), so
    the communication term is the largest over every smaller job — as many GPUs as fit, on as
    many nodes or fewer. For packed placements (all profiles) this is the raw model itself.
    Given an array of inter-node weights, one prediction per weight (:func:`learn_inter_node`
    scores a whole grid at once)."""
    g, k = sum(placement), len(placement)
    share = 1.0 if coef.batch_cap_gpus is None else min(1.0, coef.batch_cap_gpus / g)
    comm = _ring_seconds(coef, max(placement), k, inter_node)
    for fewer in range(1, k):
        g_fit = min(g, fewer * gpus_per_node)
        comm = np.maximum(
            comm, _ring_seconds(coef, -(-g_fit // fewer), min(fewer, g_fit), inter_node)
        )
    seconds = coef.overhead + coef.compute * share + comm
    return seconds if np.ndim(seconds) else float(seconds)


def choose_regime(rows: Sequence[Observation], inter_node: InterNode, noise: float) -> int | None:
    """Weak scaling unless it misses the profiles by more than their own iteration noise (at
    least 1%); then the global-batch cap, among the profiled GPU counts, that fits best (the
    largest on ties) — if it at least halves the weak-scaling misfit."""
    _, weak_rms = fit_coefficients(rows, None, inter_node)
    if weak_rms <= max(noise, 0.01):
        return None
    gpus = sorted({sum(r.placement) for r in rows})
    caps = [(fit_coefficients(rows, cap, inter_node)[1], -cap) for cap in gpus[:-1]]
    if not caps:
        return None
    rms, neg_cap = min(caps)
    return -neg_cap if rms < weak_rms / 2 else None


def leave_one_out_cv(
    rows: Sequence[Observation], batch_cap: int | None, inter_node: InterNode
) -> float:
    """RMS relative error predicting each profiled placement from the others: the model's error
    on a configuration it has not seen."""
    if len(rows) < 2:
        return 0.0
    errors = []
    for i, row in enumerate(rows):
        coef, _ = fit_coefficients([r for j, r in enumerate(rows) if j != i], batch_cap, inter_node)
        errors.append(predict_seconds(coef, row.placement, inter_node) / row.median - 1.0)
    return float(math.sqrt(np.mean(np.square(errors))))


class Profile:
    """Per-iteration time ``t(g, k)`` of one model: compute + ring all-reduce inside/across nodes.

    Parameters are stored as given and checked in :meth:`fit` (scikit-learn conventions):

    ``gpus_per_node``  GPUs per node, for packing ``predict(gpus)`` without nodes (default 8).
    ``band``           probability mass of the ``low..high`` band (default 0.95).
    ``inter_node``     "linear", "ring" or a linear weight in [0, 1] (a mix of both, e.g. from
                       :func:`learn_inter_node`): how the inter-node cost grows past 2 nodes.
    ``batch_cap``      "auto" (decide from the data), None (weak scaling) or a GPU count at which
                       the global batch stops growing.
    ``beyond_spread``  None, or the log half-width of the band past the profiled nodes learned
                       from the cluster's larger runs (:func:`learn_beyond`).

    Learned attributes (trailing ``_``): ``model_``, ``coef_`` (:class:`Coefficients`),
    ``iteration_cv_``, ``model_cv_``, ``mean_ratio_`` (mean over median iteration: stragglers),
    ``observations_`` and ``n_samples_``.
    """

    def __init__(
        self,
        *,
        gpus_per_node: int = 8,
        band: float = 0.95,
        inter_node: InterNode = "linear",
        batch_cap: int | str | None = "auto",
        beyond_spread: float | None = None,
    ):
        self.gpus_per_node = gpus_per_node
        self.band = band
        self.inter_node = inter_node
        self.batch_cap = batch_cap
        self.beyond_spread = beyond_spread

    def __repr__(self) -> str:
        return (
            f"Profile(gpus_per_node={self.gpus_per_node!r}, band={self.band!r}, "
            f"inter_node={self.inter_node!r}, batch_cap={self.batch_cap!r}, "
            f"beyond_spread={self.beyond_spread!r})"
        )

    def _check_params(self) -> None:
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be a positive int, got {self.gpus_per_node!r}")
        if not 0 < self.band < 1:
            raise ValueError(f"band must be in (0, 1), got {self.band!r}")
        shape = self.inter_node
        mix = isinstance(shape, (int, float)) and not isinstance(shape, bool)
        if not (shape in INTER_NODE_SHAPES or (mix and 0.0 <= shape <= 1.0)):
            raise ValueError(
                f"inter_node must be one of {INTER_NODE_SHAPES} or a linear weight in [0, 1], "
                f"got {shape!r}"
            )
        cap = self.batch_cap
        if not (cap in ("auto", None) or (isinstance(cap, int) and cap >= 1)):
            raise ValueError(f"batch_cap must be 'auto', None or a positive int, got {cap!r}")
        spread = self.beyond_spread
        if spread is not None and not (
            isinstance(spread, (int, float))
            and not isinstance(spread, bool)
            and math.isfinite(spread)
            and spread >= 0
        ):
            raise ValueError(f"beyond_spread must be None or a number >= 0, got {spread!r}")

    def fit(self, samples: Samples) -> Profile:
        """Learn the coefficients from 1-node and 2-node (or larger) samples of one model.

        Raises :class:`InputError` if no sample spans two nodes: the inter-node term would be
        unknown, and every multi-node prediction a guess."""
        self._check_params()
        for s in samples:
            if max(s.placement) > self.gpus_per_node:
                raise InputError(
                    s.source,
                    f"{max(s.placement)} GPUs on one node exceed "
                    f"gpus_per_node={self.gpus_per_node}",
                )
        self._start(summarise(samples), samples.source, samples.model)
        return self

    def partial_fit(self, observed: Samples | Iterable[Observation]) -> Profile:
        """Re-estimate with more iterations, e.g. the observed progress of a running job.

        ``observed`` is :class:`Samples`, or :class:`Observation` summaries when only totals
        are known (``Observation(placement, n, T/n, T/n, 0.0)`` for n iterations in T seconds;
        ``std=0`` means "spread unknown" and leaves ``iteration_cv_`` alone). New rows are
        pooled with everything seen so far (per placement, weighted by iteration count) and the
        coefficients refitted, so a long-running job soon outweighs its short profile on its
        own placement. On an unfitted Profile this is a first fit."""
        if isinstance(observed, Samples):
            source, model, new_rows = observed.source, observed.model, summarise(observed)
        else:
            source, model = "observations", ""
            new_rows = [
                replace(o, placement=placement_counts(o.placement, self.gpus_per_node))
                for o in observed
            ]
        if not hasattr(self, "coef_"):
            self._check_params()
            self._start(new_rows, source, model)
            return self
        if model and self.model_ and model != self.model_:
            raise InputError(
                source, f"samples of model {model!r} cannot refine the profile of {self.model_!r}"
            )
        rows = {r.placement: r for r in self.observations_}
        for new in new_rows:
            rows[new.placement] = merge(rows[new.placement], new) if new.placement in rows else new
        self._fit_rows(list(rows.values()))
        return self

    def _start(self, rows: list[Observation], source: str, model: str) -> None:
        if not rows:
            raise InputError(source, "no samples to fit")
        if all(len(r.placement) == 1 for r in rows):
            raise InputError(
                source,
                "all samples are single-node; a sample on two nodes (more "
                f"than {self.gpus_per_node} GPUs) is needed to estimate the "
                "inter-node cost",
            )
        self.model_ = model
        self._fit_rows(rows)

    def _fit_rows(self, rows: list[Observation]) -> None:
        spread_known = [r for r in rows if r.iterations > 1 and r.std > 0]
        total = sum(r.iterations for r in spread_known)
        cv2 = (
            sum(r.iterations * (r.std / r.mean) ** 2 for r in spread_known) / total
            if total
            else 0.0
        )
        self.iteration_cv_ = float(math.sqrt(cv2))
        if self.batch_cap == "auto":
            cap = choose_regime(rows, self.inter_node, self.iteration_cv_)
        else:
            cap = self.batch_cap
        self.coef_, _ = fit_coefficients(rows, cap, self.inter_node)
        self.model_cv_ = leave_one_out_cv(rows, cap, self.inter_node)
        self.mean_ratio_ = float(
            sum(r.iterations * r.mean for r in rows) / sum(r.iterations * r.median for r in rows)
        )
        self.observations_ = tuple(rows)
        self.n_samples_ = len(rows)

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError("this Profile is not fitted yet; call fit(samples) first")

    def placement_for(
        self,
        gpus: int | None = None,
        nodes: int | None = None,
        placement: Mapping | Sequence[int] | None = None,
    ) -> tuple[int, ...]:
        """GPUs per node for a request: the placement if given, else ``gpus`` spread evenly over
        ``nodes``, else packed on as few nodes as possible."""
        if placement is not None:
            counts = placement_counts(placement, self.gpus_per_node)
            if gpus is not None and gpus != sum(counts):
                raise ValueError(f"gpus={gpus} but the placement holds {sum(counts)} GPUs")
            if nodes is not None and nodes != len(counts):
                raise ValueError(f"nodes={nodes} but the placement spans {len(counts)} nodes")
            return counts
        if gpus is None:
            raise ValueError("give gpus (and optionally nodes) or a placement")
        if nodes is None:
            return packed(gpus, self.gpus_per_node)
        return spread(gpus, nodes, self.gpus_per_node)

    def predict(
        self,
        gpus: int | None = None,
        nodes: int | None = None,
        *,
        placement: Mapping | Sequence[int] | None = None,
    ) -> Estimate:
        """Seconds per iteration on ``gpus`` over ``nodes`` (or on a concrete ``placement``:
        node → GPU indices or a GPU count, or a sequence of per-node counts)."""
        self._check_fitted()
        placement = self.placement_for(gpus, nodes, placement)
        t = iteration_seconds(self.coef_, placement, self.inter_node, self.gpus_per_node)
        return Estimate(t, *self._band(placement, t, self.iteration_cv_))

    def runtime(
        self,
        iterations: int,
        gpus: int | None = None,
        nodes: int | None = None,
        *,
        placement: Mapping | Sequence[int] | None = None,
    ) -> RuntimeEstimate:
        """Seconds for ``iterations`` iterations: the mean iteration (median × ``mean_ratio_``)
        times the count. Iteration noise averages out over many iterations; model error does not."""
        if iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {iterations}")
        self._check_fitted()
        placement = self.placement_for(gpus, nodes, placement)
        t = iteration_seconds(self.coef_, placement, self.inter_node, self.gpus_per_node)
        noise = self.iteration_cv_ / math.sqrt(iterations) if iterations else 0.0
        scale = self.mean_ratio_ * iterations
        low, high = self._band(placement, t, noise)
        return RuntimeEstimate(t * scale, low * scale, high * scale)

    def _band(self, placement: Sequence[int], seconds: float, noise: float) -> tuple[float, float]:
        """(low, high) seconds per iteration around the prediction ``seconds``.

        Within the profiled nodes the band is the iteration noise and the model's own
        leave-one-out error. Past them, 1- and 2-node profiles cannot tell how the inter-node
        cost grows, and the band widens for it:

        - with a ``beyond_spread`` ``s`` learned from the cluster's larger runs
          (:func:`learn_beyond`), to ``seconds·[e^-s, e^s]``: the errors the cluster measured
          past its profiles, at the band's probability, which already hold the model's error
          (only the iteration noise is added);
        - without one, the "linear" and "ring" shapes bound what the profile cannot tell: the
          gap between their inter-node terms, relative to the prediction, counts as one more
          standard deviation.
        """
        k = len(placement)
        fitted = max((len(r.placement) for r in self.observations_), default=1)
        beyond = k > fitted and seconds > 0.0
        if beyond and self.beyond_spread is not None:
            half = self._z() * noise
            spread = self.beyond_spread
            return seconds * math.exp(-spread) * (1 - half), seconds * math.exp(spread) * (1 + half)
        gap = 0.0
        if beyond:
            gap = self.coef_.inter * abs(hops(k, "linear") - hops(k, "ring")) / seconds
        half = self._z() * math.hypot(noise, self.model_cv_, gap)
        return max(0.0, seconds * (1 - half)), seconds * (1 + half)

    def _z(self) -> float:
        return NormalDist().inv_cdf(0.5 + self.band / 2)

    def to_dict(self) -> dict:
        """The profile.json content: parameters, learned coefficients and the observations they
        came from (so ``partial_fit`` can continue after a reload)."""
        self._check_fitted()
        return {
            "format": PROFILE_FORMAT,
            "model": self.model_,
            "params": {
                "gpus_per_node": self.gpus_per_node,
                "band": self.band,
                "inter_node": self.inter_node,
                "batch_cap": self.batch_cap,
                "beyond_spread": self.beyond_spread,
            },
            "coefficients": asdict(self.coef_),
            "iteration_cv": self.iteration_cv_,
            "model_cv": self.model_cv_,
            "mean_ratio": self.mean_ratio_,
            "observations": [
                {**asdict(r), "placement": list(r.placement)} for r in self.observations_
            ],
        }

    @classmethod
    def from_dict(cls, data: object, source: str = "profile.json") -> Profile:
        """Inverse of :meth:`to_dict`; malformed content raises :class:`InputError` naming it."""
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise InputError(source, f'not a profile (expected "format": "{PROFILE_FORMAT}")')
        params = _get(data, "params", dict, source)
        try:
            profile = cls(**params)
            profile._check_params()
        except (TypeError, ValueError) as exc:
            raise InputError(source, str(exc), field="params") from None
        coef = _get(data, "coefficients", dict, source)
        try:
            cap = coef.get("batch_cap_gpus")
            if cap is not None and (not isinstance(cap, int) or cap < 1):
                raise ValueError("batch_cap_gpus must be null or a positive int")
            values = {k: _number(coef, k) for k in ("compute", "overhead", "intra", "inter")}
            profile.coef_ = Coefficients(**values, batch_cap_gpus=cap)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(source, str(exc).strip("'\""), field="coefficients") from None
        profile.model_ = _get(data, "model", str, source)
        for key in ("iteration_cv", "model_cv", "mean_ratio"):
            try:
                setattr(profile, key + "_", _number(data, key))
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(source, str(exc).strip("'\""), field=key) from None
        rows = []
        for i, r in enumerate(_get(data, "observations", list, source)):
            try:
                rows.append(
                    Observation(
                        placement_counts(r["placement"], profile.gpus_per_node),
                        int(r["iterations"]),
                        _number(r, "median"),
                        _number(r, "mean"),
                        _number(r, "std"),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(
                    source, str(exc).strip("'\""), field=f"observations[{i}]"
                ) from None
        profile.observations_ = tuple(rows)
        profile.n_samples_ = len(rows)
        return profile


Case = tuple[Profile, Sequence[int], float]
"""(fitted profile, placement, measured seconds per iteration): a run a cluster observed."""


@dataclass(frozen=True, slots=True)
class BeyondRange:
    """What a cluster's larger runs teach about predicting past the profiled nodes: the
    inter-node shape (a linear weight, see :func:`hops`) and the log half-width of a band that
    holds the measured runs (``Profile(beyond_spread=...)``), from ``cases`` runs."""

    inter_node: float
    spread: float
    cases: int


def _beyond_cases(cases: Iterable[Case]) -> list[Case]:
    """The cases on more nodes than their profile spanned; ValueError if there is none."""
    beyond = []
    for profile, placement, seconds in cases:
        profile._check_fitted()
        fitted = max((len(r.placement) for r in profile.observations_), default=1)
        if len(placement) > fitted:
            beyond.append((profile, tuple(placement), seconds))
    if not beyond:
        raise ValueError("no observed run beyond its profile's fitted range to learn from")
    return beyond


def learn_inter_node(cases: Iterable[Case]) -> float:
    """The linear weight (see :func:`hops`) that best predicts runs a cluster has observed beyond
    their profiles' fitted range: ``cases`` are (fitted profile, placement, measured seconds per
    iteration) with the placement on more nodes than the profile spanned.

    Fitted coefficients do not depend on the shape (1- and 2-node runs see ``h = 0, 1`` for every
    shape), so no refit is needed: the weight with the smallest median relative error on a grid
    of 101 wins (the median, because a few jobs whose network cost explodes, as mobilenet_v2 in
    ``model_info.json``, would otherwise decide for all). Raises ValueError without a case
    beyond the fitted range."""
    beyond = _beyond_cases(cases)
    errors = np.array(
        [
            np.abs(iteration_seconds(p.coef_, placement, LEARN_GRID, p.gpus_per_node) / seconds - 1)
            for p, placement, seconds in beyond
        ]
    )
    return float(LEARN_GRID[np.argmin(np.median(errors, axis=0))])


def learn_beyond(cases: Iterable[Case], band: float = 0.95) -> BeyondRange:
    """The inter-node shape (:func:`learn_inter_node`) and a calibrated band for predictions past
    the profiled nodes, from a cluster's runs beyond their profiles' fitted range.

    The spread is split-conformal: each case scores ``|ln(measured / predicted)|`` under the
    learned shape, and the spread is the ``ceil((n+1)·band)``-th smallest of the ``n`` scores,
    so a new run exchangeable with the history falls inside ``predicted·[e^-s, e^s]`` with
    probability at least ``band``. With too few cases for that (``(n+1)·band > n``) it is the
    largest score, which promises only ``n/(n+1)``. The score is relative to the whole
    prediction, not to its network term: past two nodes the errors come as much from the
    compute and overhead split as from the network (ElasticFlow's A100 tables), and a network
    term near 0 would otherwise make one run's score unbounded. Raises ValueError for a band
    outside (0, 1), without a case beyond the fitted range, with a measured time that is not
    positive, or with a profile that predicts no time."""
    if not 0.0 < band < 1.0:
        raise ValueError(f"band must be in (0, 1), got {band!r}")
    beyond = _beyond_cases(cases)
    if any(not seconds > 0.0 for _, _, seconds in beyond):
        raise ValueError("measured seconds per iteration must be positive")
    weight = learn_inter_node(beyond)
    predicted = [
        iteration_seconds(p.coef_, placement, weight, p.gpus_per_node) for p, placement, _ in beyond
    ]
    if any(not t > 0.0 for t in predicted):
        raise ValueError("a profile predicts no time for its run (all its coefficients are 0)")
    scores = np.sort([abs(math.log(seconds / t)) for (_, _, seconds), t in zip(beyond, predicted)])
    rank = min(math.ceil((scores.size + 1) * band), scores.size)
    return BeyondRange(weight, float(scores[rank - 1]), int(scores.size))


def _get(data: dict, key: str, kind: type, source: str):
    value = data.get(key)
    if not isinstance(value, kind):
        raise InputError(source, f"missing or not a {kind.__name__}", field=key)
    return value


def _number(data: dict, key: str) -> float:
    value = data[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{key} must be a non-negative number, got {value!r}")
    return float(value)
