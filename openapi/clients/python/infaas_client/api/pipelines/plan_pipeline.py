from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.plan_body import PlanBody
from ...models.plan_report import PlanReport
from ...types import Response


def _get_kwargs(
    name: str,
    *,
    body: PlanBody,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/pipelines/{name}/plan".format(
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | PlanReport | None:
    if response.status_code == 200:
        response_200 = PlanReport.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | PlanReport]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: PlanBody,
) -> Response[ErrorBody | PlanReport]:
    """Plans the pipeline with InferLine's planner: per node the variant, max batch and replicas
    that meet the end-to-end SLO percentile on the planning trace at least cost, judged by
    the simulator (SIMULATED estimator). Without `generate` or `trace_csv`, the trace is the
    pipeline's recorded arrivals of the last hour.

    Args:
        name (str):
        body (PlanBody): What to plan a pipeline on.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PlanReport]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: PlanBody,
) -> ErrorBody | PlanReport | None:
    """Plans the pipeline with InferLine's planner: per node the variant, max batch and replicas
    that meet the end-to-end SLO percentile on the planning trace at least cost, judged by
    the simulator (SIMULATED estimator). Without `generate` or `trace_csv`, the trace is the
    pipeline's recorded arrivals of the last hour.

    Args:
        name (str):
        body (PlanBody): What to plan a pipeline on.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PlanReport
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: PlanBody,
) -> Response[ErrorBody | PlanReport]:
    """Plans the pipeline with InferLine's planner: per node the variant, max batch and replicas
    that meet the end-to-end SLO percentile on the planning trace at least cost, judged by
    the simulator (SIMULATED estimator). Without `generate` or `trace_csv`, the trace is the
    pipeline's recorded arrivals of the last hour.

    Args:
        name (str):
        body (PlanBody): What to plan a pipeline on.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PlanReport]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: PlanBody,
) -> ErrorBody | PlanReport | None:
    """Plans the pipeline with InferLine's planner: per node the variant, max batch and replicas
    that meet the end-to-end SLO percentile on the planning trace at least cost, judged by
    the simulator (SIMULATED estimator). Without `generate` or `trace_csv`, the trace is the
    pipeline's recorded arrivals of the last hour.

    Args:
        name (str):
        body (PlanBody): What to plan a pipeline on.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PlanReport
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
