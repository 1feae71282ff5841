from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.plan_report_tuner import PlanReportTuner
    from ..models.plan_trace import PlanTrace
    from ..models.planned_node import PlannedNode


T = TypeVar("T", bound="PlanReport")


@_attrs_define
class PlanReport:
    """InferLine's plan of a pipeline (SIMULATED estimates), as `POST /v1/pipelines/{name}/plan`
    answers it and as an applied plan is stored.

        Attributes:
            accuracy (float): Estimated end-to-end accuracy.
            accuracy_source (str): How `accuracy` was obtained.
            applied (bool): Whether the plan was stored and its replicas loaded.
            attainment (float): Estimated share of the trace's queries within the SLO.
            cost_per_hour (float):
            estimates (int): Configurations the planner judged on the estimator.
            initial_cost_per_hour (float): Algorithm 1's feasible start and its cost, for comparison.
            nodes (list[PlannedNode]):
            notes (list[str]): What the planner assumed (unmeasured branches, ...).
            percentile (float): The percentile the SLO holds for.
            planned_at_ms (int):
            planner_ms (float): Time the planner took, ms.
            predicted_latency_ms (float): Estimated end-to-end latency at `percentile` on the planning trace (SIMULATED).
            predicted_p99_ms (float):
            service_time_ms (float):
            slo_ms (float):
            trace (PlanTrace): The planning trace.
            tuner (PlanReportTuner | Unset): The tuner's configuration for this plan (the planned traffic envelope, each
                node's
                reach and throughput): kept with an applied plan so that a restarted controller tunes
                the pipeline again.
    """

    accuracy: float
    accuracy_source: str
    applied: bool
    attainment: float
    cost_per_hour: float
    estimates: int
    initial_cost_per_hour: float
    nodes: list[PlannedNode]
    notes: list[str]
    percentile: float
    planned_at_ms: int
    planner_ms: float
    predicted_latency_ms: float
    predicted_p99_ms: float
    service_time_ms: float
    slo_ms: float
    trace: PlanTrace
    tuner: PlanReportTuner | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        accuracy = self.accuracy

        accuracy_source = self.accuracy_source

        applied = self.applied

        attainment = self.attainment

        cost_per_hour = self.cost_per_hour

        estimates = self.estimates

        initial_cost_per_hour = self.initial_cost_per_hour

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        notes = self.notes

        percentile = self.percentile

        planned_at_ms = self.planned_at_ms

        planner_ms = self.planner_ms

        predicted_latency_ms = self.predicted_latency_ms

        predicted_p99_ms = self.predicted_p99_ms

        service_time_ms = self.service_time_ms

        slo_ms = self.slo_ms

        trace = self.trace.to_dict()

        tuner: dict[str, Any] | Unset = UNSET
        if not isinstance(self.tuner, Unset):
            tuner = self.tuner.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "accuracy": accuracy,
                "accuracy_source": accuracy_source,
                "applied": applied,
                "attainment": attainment,
                "cost_per_hour": cost_per_hour,
                "estimates": estimates,
                "initial_cost_per_hour": initial_cost_per_hour,
                "nodes": nodes,
                "notes": notes,
                "percentile": percentile,
                "planned_at_ms": planned_at_ms,
                "planner_ms": planner_ms,
                "predicted_latency_ms": predicted_latency_ms,
                "predicted_p99_ms": predicted_p99_ms,
                "service_time_ms": service_time_ms,
                "slo_ms": slo_ms,
                "trace": trace,
            }
        )
        if tuner is not UNSET:
            field_dict["tuner"] = tuner

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.plan_report_tuner import PlanReportTuner  # noqa: PLC0415
        from ..models.plan_trace import PlanTrace  # noqa: PLC0415
        from ..models.planned_node import PlannedNode  # noqa: PLC0415

        d = dict(src_dict)
        accuracy = d.pop("accuracy")

        accuracy_source = d.pop("accuracy_source")

        applied = d.pop("applied")

        attainment = d.pop("attainment")

        cost_per_hour = d.pop("cost_per_hour")

        estimates = d.pop("estimates")

        initial_cost_per_hour = d.pop("initial_cost_per_hour")

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = PlannedNode.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        notes = cast(list[str], d.pop("notes"))

        percentile = d.pop("percentile")

        planned_at_ms = d.pop("planned_at_ms")

        planner_ms = d.pop("planner_ms")

        predicted_latency_ms = d.pop("predicted_latency_ms")

        predicted_p99_ms = d.pop("predicted_p99_ms")

        service_time_ms = d.pop("service_time_ms")

        slo_ms = d.pop("slo_ms")

        trace = PlanTrace.from_dict(d.pop("trace"))

        _tuner = d.pop("tuner", UNSET)
        tuner: PlanReportTuner | Unset
        if isinstance(_tuner, Unset):
            tuner = UNSET
        else:
            tuner = PlanReportTuner.from_dict(_tuner)

        plan_report = cls(
            accuracy=accuracy,
            accuracy_source=accuracy_source,
            applied=applied,
            attainment=attainment,
            cost_per_hour=cost_per_hour,
            estimates=estimates,
            initial_cost_per_hour=initial_cost_per_hour,
            nodes=nodes,
            notes=notes,
            percentile=percentile,
            planned_at_ms=planned_at_ms,
            planner_ms=planner_ms,
            predicted_latency_ms=predicted_latency_ms,
            predicted_p99_ms=predicted_p99_ms,
            service_time_ms=service_time_ms,
            slo_ms=slo_ms,
            trace=trace,
            tuner=tuner,
        )

        plan_report.additional_properties = d
        return plan_report

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
