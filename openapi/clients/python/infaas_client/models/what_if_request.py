from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.what_if_policy_name import WhatIfPolicyName
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.trace_source_type_0 import TraceSourceType0
    from ..models.trace_source_type_1 import TraceSourceType1
    from ..models.trace_source_type_2 import TraceSourceType2


T = TypeVar("T", bound="WhatIfRequest")


@_attrs_define
class WhatIfRequest:
    """`POST /v1/whatif`: simulate a trace on the tenant's applications under some policies.

    Attributes:
        policies (list[WhatIfPolicyName]): Policies to compare, each at most once, in the order given.
        trace (TraceSourceType0 | TraceSourceType1 | TraceSourceType2): Where a run's trace comes from: exactly one of
            `recorded`, `csv` or `generate`.
        cold_start (bool | None | Unset): The platform's policies (`infaas_greedy`, `infaas_exact`) start with no
            instance
            loaded, as a server that has just started, and the first queries' selection loads what
            they need: the replay of a trace sent to a fresh server. Default false: they start with
            what the platform holds after serving the trace's opening traffic. The baselines
            provision as always.
        cpu_cores (int | None | Unset): Cores (intra-op threads) a simulated worker offers (default: the most cores of a
            live
            worker).
        cpu_workers (int | None | Unset): CPU workers of the simulated cluster (default: the live CPU workers, or 1 when
            the
            cluster would otherwise have no worker). The cluster needs at least one worker:
            `cpu_workers` 0 with `gpu_workers` 0 (given, or the live GPU workers when not given)
            is refused with 422, naming both.
        gpu_workers (int | None | Unset): GPU workers of the simulated cluster (default: the live GPU workers). At least
            one
            worker, CPU or GPU: with `cpu_workers` also 0 the run is refused with 422.
        max_cpu_workers (int | None | Unset): Most CPU workers the platform's worker autoscaler may run in the
            simulation (default:
            `cpu_workers`, none is added); workers it adds take `worker_start_s` to join.
        max_gpu_workers (int | None | Unset): Most GPU workers, likewise (default: `gpu_workers`).
        request_cpu_ms (float | None | Unset): Core time, in ms, each query takes on the cores of the worker serving it
            besides its
            instance's run: the HTTP edge (and clients) sharing that worker's cores, as on one
            machine serving its own requests. While the threads of the instances running a batch
            there and this load (the worker's recent query rate times this figure) exceed its
            cores, CPU batches run slower in proportion. Measure it as the CPU time the server and
            its clients spend per request of a model that does no work (same inputs and outputs).
            Default 0: a worker's cores are its instances' alone.
        request_overhead_ms (list[float] | None | Unset): The request path outside the instance (HTTP, JSON, routing,
            the worker call) as an
            empirical distribution in ms: every simulated query's latency gets one draw. For
            instance latencies measured on the real server with one query at a time
            (`infaas loadgen --rate 0 --json`, `percentiles_ms`). Default: none.
        slack (float | None | Unset): Headroom the platform's autoscaler keeps in the run (default: the server's
            `autoscale.slack`).
        worker_start_s (float | None | Unset): Seconds from a worker's start until it takes instances (default 30).
    """

    policies: list[WhatIfPolicyName]
    trace: TraceSourceType0 | TraceSourceType1 | TraceSourceType2
    cold_start: bool | None | Unset = UNSET
    cpu_cores: int | None | Unset = UNSET
    cpu_workers: int | None | Unset = UNSET
    gpu_workers: int | None | Unset = UNSET
    max_cpu_workers: int | None | Unset = UNSET
    max_gpu_workers: int | None | Unset = UNSET
    request_cpu_ms: float | None | Unset = UNSET
    request_overhead_ms: list[float] | None | Unset = UNSET
    slack: float | None | Unset = UNSET
    worker_start_s: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.trace_source_type_0 import TraceSourceType0  # noqa: PLC0415
        from ..models.trace_source_type_1 import TraceSourceType1  # noqa: PLC0415

        policies = []
        for policies_item_data in self.policies:
            policies_item = policies_item_data.value
            policies.append(policies_item)

        trace: dict[str, Any]
        if isinstance(self.trace, TraceSourceType0):
            trace = self.trace.to_dict()
        elif isinstance(self.trace, TraceSourceType1):
            trace = self.trace.to_dict()
        else:
            trace = self.trace.to_dict()

        cold_start: bool | None | Unset
        if isinstance(self.cold_start, Unset):
            cold_start = UNSET
        else:
            cold_start = self.cold_start

        cpu_cores: int | None | Unset
        if isinstance(self.cpu_cores, Unset):
            cpu_cores = UNSET
        else:
            cpu_cores = self.cpu_cores

        cpu_workers: int | None | Unset
        if isinstance(self.cpu_workers, Unset):
            cpu_workers = UNSET
        else:
            cpu_workers = self.cpu_workers

        gpu_workers: int | None | Unset
        if isinstance(self.gpu_workers, Unset):
            gpu_workers = UNSET
        else:
            gpu_workers = self.gpu_workers

        max_cpu_workers: int | None | Unset
        if isinstance(self.max_cpu_workers, Unset):
            max_cpu_workers = UNSET
        else:
            max_cpu_workers = self.max_cpu_workers

        max_gpu_workers: int | None | Unset
        if isinstance(self.max_gpu_workers, Unset):
            max_gpu_workers = UNSET
        else:
            max_gpu_workers = self.max_gpu_workers

        request_cpu_ms: float | None | Unset
        if isinstance(self.request_cpu_ms, Unset):
            request_cpu_ms = UNSET
        else:
            request_cpu_ms = self.request_cpu_ms

        request_overhead_ms: list[float] | None | Unset
        if isinstance(self.request_overhead_ms, Unset):
            request_overhead_ms = UNSET
        elif isinstance(self.request_overhead_ms, list):
            request_overhead_ms = self.request_overhead_ms

        else:
            request_overhead_ms = self.request_overhead_ms

        slack: float | None | Unset
        if isinstance(self.slack, Unset):
            slack = UNSET
        else:
            slack = self.slack

        worker_start_s: float | None | Unset
        if isinstance(self.worker_start_s, Unset):
            worker_start_s = UNSET
        else:
            worker_start_s = self.worker_start_s

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "policies": policies,
                "trace": trace,
            }
        )
        if cold_start is not UNSET:
            field_dict["cold_start"] = cold_start
        if cpu_cores is not UNSET:
            field_dict["cpu_cores"] = cpu_cores
        if cpu_workers is not UNSET:
            field_dict["cpu_workers"] = cpu_workers
        if gpu_workers is not UNSET:
            field_dict["gpu_workers"] = gpu_workers
        if max_cpu_workers is not UNSET:
            field_dict["max_cpu_workers"] = max_cpu_workers
        if max_gpu_workers is not UNSET:
            field_dict["max_gpu_workers"] = max_gpu_workers
        if request_cpu_ms is not UNSET:
            field_dict["request_cpu_ms"] = request_cpu_ms
        if request_overhead_ms is not UNSET:
            field_dict["request_overhead_ms"] = request_overhead_ms
        if slack is not UNSET:
            field_dict["slack"] = slack
        if worker_start_s is not UNSET:
            field_dict["worker_start_s"] = worker_start_s

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.trace_source_type_0 import TraceSourceType0  # noqa: PLC0415
        from ..models.trace_source_type_1 import TraceSourceType1  # noqa: PLC0415
        from ..models.trace_source_type_2 import TraceSourceType2  # noqa: PLC0415

        d = dict(src_dict)
        policies = []
        _policies = d.pop("policies")
        for policies_item_data in _policies:
            policies_item = WhatIfPolicyName(policies_item_data)

            policies.append(policies_item)

        def _parse_trace(data: object) -> TraceSourceType0 | TraceSourceType1 | TraceSourceType2:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_trace_source_type_0 = TraceSourceType0.from_dict(data)

                return componentsschemas_trace_source_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_trace_source_type_1 = TraceSourceType1.from_dict(data)

                return componentsschemas_trace_source_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_trace_source_type_2 = TraceSourceType2.from_dict(data)

            return componentsschemas_trace_source_type_2

        trace = _parse_trace(d.pop("trace"))

        def _parse_cold_start(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        cold_start = _parse_cold_start(d.pop("cold_start", UNSET))

        def _parse_cpu_cores(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cpu_cores = _parse_cpu_cores(d.pop("cpu_cores", UNSET))

        def _parse_cpu_workers(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cpu_workers = _parse_cpu_workers(d.pop("cpu_workers", UNSET))

        def _parse_gpu_workers(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        gpu_workers = _parse_gpu_workers(d.pop("gpu_workers", UNSET))

        def _parse_max_cpu_workers(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_cpu_workers = _parse_max_cpu_workers(d.pop("max_cpu_workers", UNSET))

        def _parse_max_gpu_workers(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_gpu_workers = _parse_max_gpu_workers(d.pop("max_gpu_workers", UNSET))

        def _parse_request_cpu_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        request_cpu_ms = _parse_request_cpu_ms(d.pop("request_cpu_ms", UNSET))

        def _parse_request_overhead_ms(data: object) -> list[float] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                request_overhead_ms_type_0 = cast(list[float], data)

                return request_overhead_ms_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[float] | None | Unset, data)

        request_overhead_ms = _parse_request_overhead_ms(d.pop("request_overhead_ms", UNSET))

        def _parse_slack(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        slack = _parse_slack(d.pop("slack", UNSET))

        def _parse_worker_start_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        worker_start_s = _parse_worker_start_s(d.pop("worker_start_s", UNSET))

        what_if_request = cls(
            policies=policies,
            trace=trace,
            cold_start=cold_start,
            cpu_cores=cpu_cores,
            cpu_workers=cpu_workers,
            gpu_workers=gpu_workers,
            max_cpu_workers=max_cpu_workers,
            max_gpu_workers=max_gpu_workers,
            request_cpu_ms=request_cpu_ms,
            request_overhead_ms=request_overhead_ms,
            slack=slack,
            worker_start_s=worker_start_s,
        )

        return what_if_request
