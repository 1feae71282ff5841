from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.pipeline_spec import PipelineSpec
    from ..models.pipeline_validation import PipelineValidation
    from ..models.pipeline_view_status_type_0 import PipelineViewStatusType0
    from ..models.plan_report import PlanReport


T = TypeVar("T", bound="PipelineView")


@_attrs_define
class PipelineView:
    """A registered pipeline.

    Attributes:
        created_at_ms (int):
        name (str):
        queries_last_minute (int): Queries of the last minute on this controller.
        spec (PipelineSpec): A pipeline document as registered (`POST /v1/pipelines`, JSON or YAML). Beyond what the
            fields say, the server checks (400, naming the node and the tensor): names unique among
            inputs and nodes; every source a pipeline input or `"node.output"` of another node; no
            cycle; outputs that every row gets; tensors that connect to the nodes' models.
        status (None | PipelineViewStatusType0): Live figures (`GET /v1/pipelines/{name}` only): per node its planned
            and last variant,
            replicas, queued rows, p99 over the last minute, measured branch probability and cost
            per hour; the end-to-end p99 and SLO attainment per second (this controller).
        updated_at_ms (int):
        description (None | str | Unset):
        plan (None | PlanReport | Unset):
        validation (None | PipelineValidation | Unset):
    """

    created_at_ms: int
    name: str
    queries_last_minute: int
    spec: PipelineSpec
    status: None | PipelineViewStatusType0
    updated_at_ms: int
    description: None | str | Unset = UNSET
    plan: None | PlanReport | Unset = UNSET
    validation: None | PipelineValidation | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.pipeline_validation import PipelineValidation  # noqa: PLC0415
        from ..models.pipeline_view_status_type_0 import PipelineViewStatusType0  # noqa: PLC0415
        from ..models.plan_report import PlanReport  # noqa: PLC0415

        created_at_ms = self.created_at_ms

        name = self.name

        queries_last_minute = self.queries_last_minute

        spec = self.spec.to_dict()

        status: dict[str, Any] | None
        if isinstance(self.status, PipelineViewStatusType0):
            status = self.status.to_dict()
        else:
            status = self.status

        updated_at_ms = self.updated_at_ms

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        plan: dict[str, Any] | None | Unset
        if isinstance(self.plan, Unset):
            plan = UNSET
        elif isinstance(self.plan, PlanReport):
            plan = self.plan.to_dict()
        else:
            plan = self.plan

        validation: dict[str, Any] | None | Unset
        if isinstance(self.validation, Unset):
            validation = UNSET
        elif isinstance(self.validation, PipelineValidation):
            validation = self.validation.to_dict()
        else:
            validation = self.validation

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at_ms": created_at_ms,
                "name": name,
                "queries_last_minute": queries_last_minute,
                "spec": spec,
                "status": status,
                "updated_at_ms": updated_at_ms,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if plan is not UNSET:
            field_dict["plan"] = plan
        if validation is not UNSET:
            field_dict["validation"] = validation

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.pipeline_spec import PipelineSpec  # noqa: PLC0415
        from ..models.pipeline_validation import PipelineValidation  # noqa: PLC0415
        from ..models.pipeline_view_status_type_0 import PipelineViewStatusType0  # noqa: PLC0415
        from ..models.plan_report import PlanReport  # noqa: PLC0415

        d = dict(src_dict)
        created_at_ms = d.pop("created_at_ms")

        name = d.pop("name")

        queries_last_minute = d.pop("queries_last_minute")

        spec = PipelineSpec.from_dict(d.pop("spec"))

        def _parse_status(data: object) -> None | PipelineViewStatusType0:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                status_type_0 = PipelineViewStatusType0.from_dict(data)

                return status_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PipelineViewStatusType0, data)

        status = _parse_status(d.pop("status"))

        updated_at_ms = d.pop("updated_at_ms")

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        def _parse_plan(data: object) -> None | PlanReport | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                plan_type_1 = PlanReport.from_dict(data)

                return plan_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PlanReport | Unset, data)

        plan = _parse_plan(d.pop("plan", UNSET))

        def _parse_validation(data: object) -> None | PipelineValidation | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                validation_type_1 = PipelineValidation.from_dict(data)

                return validation_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PipelineValidation | Unset, data)

        validation = _parse_validation(d.pop("validation", UNSET))

        pipeline_view = cls(
            created_at_ms=created_at_ms,
            name=name,
            queries_last_minute=queries_last_minute,
            spec=spec,
            status=status,
            updated_at_ms=updated_at_ms,
            description=description,
            plan=plan,
            validation=validation,
        )

        pipeline_view.additional_properties = d
        return pipeline_view

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
