from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.combiner import Combiner
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.node_condition import NodeCondition
    from ..models.node_spec_inputs import NodeSpecInputs


T = TypeVar("T", bound="NodeSpec")


@_attrs_define
class NodeSpec:
    """One node of the DAG: exactly one of `app`, `model` or `combine`.

    Attributes:
        name (str): 1-64 of `[A-Za-z0-9_-]`, starting with a letter or digit (no '.': sources are written
            `"node.output"`).
        app (None | str | Unset): An application: the platform picks the variant (model-less).
        combine (Combiner | None | Unset):
        from_ (list[str] | Unset): The combiner's sources, `"node.output"`, in order.
        inputs (NodeSpecInputs | Unset): The model's input name -> source (a request input's name or `"node.output"`). A
            model
            with one input may omit the map when the request has one input.
        model (None | str | Unset): A registered model.
        when (NodeCondition | None | Unset):
    """

    name: str
    app: None | str | Unset = UNSET
    combine: Combiner | None | Unset = UNSET
    from_: list[str] | Unset = UNSET
    inputs: NodeSpecInputs | Unset = UNSET
    model: None | str | Unset = UNSET
    when: NodeCondition | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.node_condition import NodeCondition  # noqa: PLC0415

        name = self.name

        app: None | str | Unset
        if isinstance(self.app, Unset):
            app = UNSET
        else:
            app = self.app

        combine: None | str | Unset
        if isinstance(self.combine, Unset):
            combine = UNSET
        elif isinstance(self.combine, Combiner):
            combine = self.combine.value
        else:
            combine = self.combine

        from_: list[str] | Unset = UNSET
        if not isinstance(self.from_, Unset):
            from_ = self.from_

        inputs: dict[str, Any] | Unset = UNSET
        if not isinstance(self.inputs, Unset):
            inputs = self.inputs.to_dict()

        model: None | str | Unset
        if isinstance(self.model, Unset):
            model = UNSET
        else:
            model = self.model

        when: dict[str, Any] | None | Unset
        if isinstance(self.when, Unset):
            when = UNSET
        elif isinstance(self.when, NodeCondition):
            when = self.when.to_dict()
        else:
            when = self.when

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
            }
        )
        if app is not UNSET:
            field_dict["app"] = app
        if combine is not UNSET:
            field_dict["combine"] = combine
        if from_ is not UNSET:
            field_dict["from"] = from_
        if inputs is not UNSET:
            field_dict["inputs"] = inputs
        if model is not UNSET:
            field_dict["model"] = model
        if when is not UNSET:
            field_dict["when"] = when

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.node_condition import NodeCondition  # noqa: PLC0415
        from ..models.node_spec_inputs import NodeSpecInputs  # noqa: PLC0415

        d = dict(src_dict)
        name = d.pop("name")

        def _parse_app(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        app = _parse_app(d.pop("app", UNSET))

        def _parse_combine(data: object) -> Combiner | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                combine_type_1 = Combiner(data)

                return combine_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Combiner | None | Unset, data)

        combine = _parse_combine(d.pop("combine", UNSET))

        from_ = cast(list[str], d.pop("from", UNSET))

        _inputs = d.pop("inputs", UNSET)
        inputs: NodeSpecInputs | Unset
        if isinstance(_inputs, Unset):
            inputs = UNSET
        else:
            inputs = NodeSpecInputs.from_dict(_inputs)

        def _parse_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model = _parse_model(d.pop("model", UNSET))

        def _parse_when(data: object) -> NodeCondition | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                when_type_1 = NodeCondition.from_dict(data)

                return when_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NodeCondition | None | Unset, data)

        when = _parse_when(d.pop("when", UNSET))

        node_spec = cls(
            name=name,
            app=app,
            combine=combine,
            from_=from_,
            inputs=inputs,
            model=model,
            when=when,
        )

        return node_spec
