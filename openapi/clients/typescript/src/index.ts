// The infaas client for TypeScript: typed requests over the generated `schema.d.ts`
// (openapi-typescript, from openapi/openapi.json) with openapi-fetch.
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };
export type Schemas = components["schemas"];
export type InfaasClient = Client<paths>;

/** A client that sends `Authorization: Bearer <token>` with every request. */
export function createInfaasClient(baseUrl: string, token?: string): InfaasClient {
  const headers: Record<string, string> = token ? { Authorization: `Bearer ${token}` } : {};
  return createClient<paths>({ baseUrl, headers });
}

/** Exchanges an API key for an access token (`POST /v1/auth/token`) and returns a client
 * that uses it. */
export async function login(baseUrl: string, apiKey: string): Promise<InfaasClient> {
  const { data, error, response } = await createInfaasClient(baseUrl).POST("/v1/auth/token", {
    body: { api_key: apiKey },
  });
  if (!data) {
    throw new Error(`token exchange failed (${response.status}): ${error?.error ?? "no answer"}`);
  }
  return createInfaasClient(baseUrl, data.access_token);
}

/** Sends fields and files as multipart/form-data (model registration, job submission):
 * pass it as `bodySerializer`. Strings and numbers become fields, `File`s files (an array
 * repeats the field); undefined and null fields are left out. */
export function multipart(body: unknown): FormData {
  const form = new FormData();
  for (const [key, value] of Object.entries(body as Record<string, unknown>)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (v === undefined || v === null) continue;
      if (v instanceof File) form.append(key, v, v.name);
      else if (v instanceof Blob) form.append(key, v, key);
      else form.append(key, String(v));
    }
  }
  return form;
}
