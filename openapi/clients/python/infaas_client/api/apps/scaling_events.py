from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.scaling_events import ScalingEvents
from ...types import UNSET, Response, Unset


def _get_kwargs(
    app: str,
    *,
    limit: int | None | Unset = UNSET,
    since_ms: int | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_limit: int | None | Unset
    if isinstance(limit, Unset):
        json_limit = UNSET
    else:
        json_limit = limit
    params["limit"] = json_limit

    json_since_ms: int | None | Unset
    if isinstance(since_ms, Unset):
        json_since_ms = UNSET
    else:
        json_since_ms = since_ms
    params["since_ms"] = json_since_ms

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/apps/{app}/scaling-events".format(
            app=quote(str(app), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | ScalingEvents | None:
    if response.status_code == 200:
        response_200 = ScalingEvents.from_dict(response.json())

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

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | ScalingEvents]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    app: str,
    *,
    client: AuthenticatedClient,
    limit: int | None | Unset = UNSET,
    since_ms: int | None | Unset = UNSET,
) -> Response[ErrorBody | ScalingEvents]:
    """Scaling decisions concerning an application, newest first: replicas added or removed,
    upgrades and downgrades, vertical scaling, migrations, workers added or removed for it.

    Args:
        app (str):
        limit (int | None | Unset):
        since_ms (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | ScalingEvents]
    """

    kwargs = _get_kwargs(
        app=app,
        limit=limit,
        since_ms=since_ms,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    app: str,
    *,
    client: AuthenticatedClient,
    limit: int | None | Unset = UNSET,
    since_ms: int | None | Unset = UNSET,
) -> ErrorBody | ScalingEvents | None:
    """Scaling decisions concerning an application, newest first: replicas added or removed,
    upgrades and downgrades, vertical scaling, migrations, workers added or removed for it.

    Args:
        app (str):
        limit (int | None | Unset):
        since_ms (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | ScalingEvents
    """

    return sync_detailed(
        app=app,
        client=client,
        limit=limit,
        since_ms=since_ms,
    ).parsed


async def asyncio_detailed(
    app: str,
    *,
    client: AuthenticatedClient,
    limit: int | None | Unset = UNSET,
    since_ms: int | None | Unset = UNSET,
) -> Response[ErrorBody | ScalingEvents]:
    """Scaling decisions concerning an application, newest first: replicas added or removed,
    upgrades and downgrades, vertical scaling, migrations, workers added or removed for it.

    Args:
        app (str):
        limit (int | None | Unset):
        since_ms (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | ScalingEvents]
    """

    kwargs = _get_kwargs(
        app=app,
        limit=limit,
        since_ms=since_ms,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    app: str,
    *,
    client: AuthenticatedClient,
    limit: int | None | Unset = UNSET,
    since_ms: int | None | Unset = UNSET,
) -> ErrorBody | ScalingEvents | None:
    """Scaling decisions concerning an application, newest first: replicas added or removed,
    upgrades and downgrades, vertical scaling, migrations, workers added or removed for it.

    Args:
        app (str):
        limit (int | None | Unset):
        since_ms (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | ScalingEvents
    """

    return (
        await asyncio_detailed(
            app=app,
            client=client,
            limit=limit,
            since_ms=since_ms,
        )
    ).parsed
