from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.model_view_signature import ModelViewSignature
    from ..models.pruned_variant_view import PrunedVariantView
    from ..models.variant_view import VariantView


T = TypeVar("T", bound="ModelView")


@_attrs_define
class ModelView:
    """
    Attributes:
        app (str):
        created_at_ms (int):
        name (str):
        progress (float): Fraction of the background work done, in [0, 1].
        sha256 (str):
        signature (ModelViewSignature): Inputs and outputs: `{"inputs": [{"name", "datatype", "shape"}], "outputs":
            [...]}`.
        size_bytes (int):
        status (str): `pending`, `generating`, `profiling`, `ready` or `failed`.
        task (str):
        updated_at_ms (int):
        variants (list[VariantView]): The variants kept (pruned ones are in `pruned`).
        error (None | str | Unset):
        label_names (list[str] | None | Unset):
        output (None | str | Unset): Declared output holding the prediction, if any.
        progress_detail (None | str | Unset): The current step of the background work.
        pruned (list[PrunedVariantView] | Unset): The variants the registration did not keep, with the variant that
            dominates each and
            why (also summed up in the final `progress_detail`).
    """

    app: str
    created_at_ms: int
    name: str
    progress: float
    sha256: str
    signature: ModelViewSignature
    size_bytes: int
    status: str
    task: str
    updated_at_ms: int
    variants: list[VariantView]
    error: None | str | Unset = UNSET
    label_names: list[str] | None | Unset = UNSET
    output: None | str | Unset = UNSET
    progress_detail: None | str | Unset = UNSET
    pruned: list[PrunedVariantView] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        app = self.app

        created_at_ms = self.created_at_ms

        name = self.name

        progress = self.progress

        sha256 = self.sha256

        signature = self.signature.to_dict()

        size_bytes = self.size_bytes

        status = self.status

        task = self.task

        updated_at_ms = self.updated_at_ms

        variants = []
        for variants_item_data in self.variants:
            variants_item = variants_item_data.to_dict()
            variants.append(variants_item)

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        label_names: list[str] | None | Unset
        if isinstance(self.label_names, Unset):
            label_names = UNSET
        elif isinstance(self.label_names, list):
            label_names = self.label_names

        else:
            label_names = self.label_names

        output: None | str | Unset
        if isinstance(self.output, Unset):
            output = UNSET
        else:
            output = self.output

        progress_detail: None | str | Unset
        if isinstance(self.progress_detail, Unset):
            progress_detail = UNSET
        else:
            progress_detail = self.progress_detail

        pruned: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.pruned, Unset):
            pruned = []
            for pruned_item_data in self.pruned:
                pruned_item = pruned_item_data.to_dict()
                pruned.append(pruned_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "app": app,
                "created_at_ms": created_at_ms,
                "name": name,
                "progress": progress,
                "sha256": sha256,
                "signature": signature,
                "size_bytes": size_bytes,
                "status": status,
                "task": task,
                "updated_at_ms": updated_at_ms,
                "variants": variants,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error
        if label_names is not UNSET:
            field_dict["label_names"] = label_names
        if output is not UNSET:
            field_dict["output"] = output
        if progress_detail is not UNSET:
            field_dict["progress_detail"] = progress_detail
        if pruned is not UNSET:
            field_dict["pruned"] = pruned

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.model_view_signature import ModelViewSignature  # noqa: PLC0415
        from ..models.pruned_variant_view import PrunedVariantView  # noqa: PLC0415
        from ..models.variant_view import VariantView  # noqa: PLC0415

        d = dict(src_dict)
        app = d.pop("app")

        created_at_ms = d.pop("created_at_ms")

        name = d.pop("name")

        progress = d.pop("progress")

        sha256 = d.pop("sha256")

        signature = ModelViewSignature.from_dict(d.pop("signature"))

        size_bytes = d.pop("size_bytes")

        status = d.pop("status")

        task = d.pop("task")

        updated_at_ms = d.pop("updated_at_ms")

        variants = []
        _variants = d.pop("variants")
        for variants_item_data in _variants:
            variants_item = VariantView.from_dict(variants_item_data)

            variants.append(variants_item)

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_label_names(data: object) -> list[str] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                label_names_type_0 = cast(list[str], data)

                return label_names_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[str] | None | Unset, data)

        label_names = _parse_label_names(d.pop("label_names", UNSET))

        def _parse_output(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        output = _parse_output(d.pop("output", UNSET))

        def _parse_progress_detail(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        progress_detail = _parse_progress_detail(d.pop("progress_detail", UNSET))

        _pruned = d.pop("pruned", UNSET)
        pruned: list[PrunedVariantView] | Unset = UNSET
        if _pruned is not UNSET:
            pruned = []
            for pruned_item_data in _pruned:
                pruned_item = PrunedVariantView.from_dict(pruned_item_data)

                pruned.append(pruned_item)

        model_view = cls(
            app=app,
            created_at_ms=created_at_ms,
            name=name,
            progress=progress,
            sha256=sha256,
            signature=signature,
            size_bytes=size_bytes,
            status=status,
            task=task,
            updated_at_ms=updated_at_ms,
            variants=variants,
            error=error,
            label_names=label_names,
            output=output,
            progress_detail=progress_detail,
            pruned=pruned,
        )

        model_view.additional_properties = d
        return model_view

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
