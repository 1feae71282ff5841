from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.pipeline_spec import PipelineSpec
from ...models.pipeline_view import PipelineView
from ...types import Response


def _get_kwargs(
    *,
    body: PipelineSpec,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/pipelines",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | PipelineView | None:
    if response.status_code == 201:
        response_201 = PipelineView.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | PipelineView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: PipelineSpec,
) -> Response[ErrorBody | PipelineView]:
    """Registers a pipeline (a JSON or YAML document). Every node, tensor and condition is checked
    against the registry; an error names the node and the tensor.

    Args:
        body (PipelineSpec): A pipeline document as registered (`POST /v1/pipelines`, JSON or
            YAML). Beyond what the
            fields say, the server checks (400, naming the node and the tensor): names unique among
            inputs and nodes; every source a pipeline input or `"node.output"` of another node; no
            cycle; outputs that every row gets; tensors that connect to the nodes' models.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PipelineView]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: PipelineSpec,
) -> ErrorBody | PipelineView | None:
    """Registers a pipeline (a JSON or YAML document). Every node, tensor and condition is checked
    against the registry; an error names the node and the tensor.

    Args:
        body (PipelineSpec): A pipeline document as registered (`POST /v1/pipelines`, JSON or
            YAML). Beyond what the
            fields say, the server checks (400, naming the node and the tensor): names unique among
            inputs and nodes; every source a pipeline input or `"node.output"` of another node; no
            cycle; outputs that every row gets; tensors that connect to the nodes' models.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PipelineView
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: PipelineSpec,
) -> Response[ErrorBody | PipelineView]:
    """Registers a pipeline (a JSON or YAML document). Every node, tensor and condition is checked
    against the registry; an error names the node and the tensor.

    Args:
        body (PipelineSpec): A pipeline document as registered (`POST /v1/pipelines`, JSON or
            YAML). Beyond what the
            fields say, the server checks (400, naming the node and the tensor): names unique among
            inputs and nodes; every source a pipeline input or `"node.output"` of another node; no
            cycle; outputs that every row gets; tensors that connect to the nodes' models.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PipelineView]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: PipelineSpec,
) -> ErrorBody | PipelineView | None:
    """Registers a pipeline (a JSON or YAML document). Every node, tensor and condition is checked
    against the registry; an error names the node and the tensor.

    Args:
        body (PipelineSpec): A pipeline document as registered (`POST /v1/pipelines`, JSON or
            YAML). Beyond what the
            fields say, the server checks (400, naming the node and the tensor): names unique among
            inputs and nodes; every source a pipeline input or `"node.output"` of another node; no
            cycle; outputs that every row gets; tensors that connect to the nodes' models.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PipelineView
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
