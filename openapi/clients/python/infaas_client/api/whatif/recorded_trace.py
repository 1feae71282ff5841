from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    app: None | str | Unset = UNSET,
    minutes: int | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_app: None | str | Unset
    if isinstance(app, Unset):
        json_app = UNSET
    else:
        json_app = app
    params["app"] = json_app

    json_minutes: int | None | Unset
    if isinstance(minutes, Unset):
        json_minutes = UNSET
    else:
        json_minutes = minutes
    params["minutes"] = json_minutes

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/traces/recorded",
        "params": params,
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | str | None:
    if response.status_code == 200:
        response_200 = response.text
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


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[ErrorBody | str]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    app: None | str | Unset = UNSET,
    minutes: int | None | Unset = UNSET,
) -> Response[ErrorBody | str]:
    """The tenant's recorded traffic as a trace in the simulator's CSV format
    (`time_ms,app,slo_ms,min_accuracy`): per second, the queries that arrived, spread evenly
    inside the second, with the second's strictest SLO and highest minimum accuracy; times
    from the first second exported. A header only when nothing was recorded.

    Args:
        app (None | str | Unset):
        minutes (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | str]
    """

    kwargs = _get_kwargs(
        app=app,
        minutes=minutes,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    app: None | str | Unset = UNSET,
    minutes: int | None | Unset = UNSET,
) -> ErrorBody | str | None:
    """The tenant's recorded traffic as a trace in the simulator's CSV format
    (`time_ms,app,slo_ms,min_accuracy`): per second, the queries that arrived, spread evenly
    inside the second, with the second's strictest SLO and highest minimum accuracy; times
    from the first second exported. A header only when nothing was recorded.

    Args:
        app (None | str | Unset):
        minutes (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | str
    """

    return sync_detailed(
        client=client,
        app=app,
        minutes=minutes,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    app: None | str | Unset = UNSET,
    minutes: int | None | Unset = UNSET,
) -> Response[ErrorBody | str]:
    """The tenant's recorded traffic as a trace in the simulator's CSV format
    (`time_ms,app,slo_ms,min_accuracy`): per second, the queries that arrived, spread evenly
    inside the second, with the second's strictest SLO and highest minimum accuracy; times
    from the first second exported. A header only when nothing was recorded.

    Args:
        app (None | str | Unset):
        minutes (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | str]
    """

    kwargs = _get_kwargs(
        app=app,
        minutes=minutes,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    app: None | str | Unset = UNSET,
    minutes: int | None | Unset = UNSET,
) -> ErrorBody | str | None:
    """The tenant's recorded traffic as a trace in the simulator's CSV format
    (`time_ms,app,slo_ms,min_accuracy`): per second, the queries that arrived, spread evenly
    inside the second, with the second's strictest SLO and highest minimum accuracy; times
    from the first second exported. A header only when nothing was recorded.

    Args:
        app (None | str | Unset):
        minutes (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | str
    """

    return (
        await asyncio_detailed(
            client=client,
            app=app,
            minutes=minutes,
        )
    ).parsed
