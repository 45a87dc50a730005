/**
 * One write to the API server (a status merge patch, an Event), sent without client-node's
 * generated API layers: the request gets client-node's own connection settings and credentials
 * (`KubeConfig.applyToHTTPSOptions`: the agent with its CA and client certificate, a bearer
 * token or an exec plugin's, basic auth, impersonation — what its `Watch` uses too) and goes out
 * on `node:http(s)`; the answer's body is read only when the write is refused.
 *
 * Why: the generated `patchNamespacedServiceStatus` serializes the body through its type map,
 * sends it through node-fetch, then parses the returned Service and deserializes it into model
 * classes, which the controller throws away. At the controller's cold start (one patch and one
 * Event per Service) that was about a third of the client's CPU per write (bench/RESULTS.md,
 * "Kubernetes: controller to agents' maps").
 *
 * {@linkcode rawGet} reads lists the same way (the informers' lists: no model classes, so a listed
 * object looks like the same object in a watch event).
 *
 * A refused request throws {@linkcode ApiWriteError} with the HTTP status as `code`, the parsed
 * `Status` (or the text) as `body` and the headers (lower case), as client-node's `ApiException`
 * carries them (`_write_retry.ts` reads `code` and `retry-after`). No answer at all (connection
 * refused, {@linkcode REQUEST_TIMEOUT_MS}) throws a plain error without `code`.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import http from "node:http";
import https from "node:https";
import type * as k8s from "@kubernetes/client-node";

/** Longest wait for one write's answer (ms). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** A request the API server refused: `code` is its HTTP status. */
export class ApiWriteError extends Error {
  constructor(
    readonly code: number,
    readonly body: unknown,
    readonly headers: Record<string, string>,
    what: string,
  ) {
    const reason = typeof body === "object" && body !== null && "message" in body
      ? String((body as { message: unknown }).message)
      : String(body);
    super(`HTTP ${code} on ${what}: ${reason}`);
    this.name = "ApiWriteError";
  }
}

/** What {@linkcode rawWrite} sends. */
export interface RawWrite {
  method: "PATCH" | "POST";
  /** The path below the cluster's server URL (`/api/v1/namespaces/…/services/…/status`). */
  path: string;
  /** Query parameters (`fieldManager`). */
  query?: Record<string, string>;
  contentType: string;
  body: unknown;
}

/** Sends `w` to the current cluster of `kc`; resolves on a 2xx answer. */
export async function rawWrite(kc: k8s.KubeConfig, w: RawWrite): Promise<void> {
  await send(kc, w.method, w.path, w.query, { type: w.contentType, text: JSON.stringify(w.body) });
}

/**
 * GETs `path` (a list: `/api/v1/services`) from the current cluster of `kc` and returns the
 * answer's JSON as it came (no model classes: timestamps stay strings, as in watch events).
 */
export async function rawGet<T>(
  kc: k8s.KubeConfig,
  path: string,
  query?: Record<string, string>,
): Promise<T> {
  return JSON.parse(await send(kc, "GET", path, query, undefined, true)) as T;
}

async function send(
  kc: k8s.KubeConfig,
  method: string,
  path: string,
  query: Record<string, string> | undefined,
  payload: { type: string; text: string } | undefined,
  wantBody = false,
): Promise<string> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("No currently active cluster");
  const url = new URL(cluster.server.replace(/\/+$/, "") + path);
  for (const [k, v] of Object.entries(query ?? {})) url.searchParams.set(k, v);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts); // credentials, TLS settings and the (kept-alive) agent
  const headers: Record<string, string> = {
    ...opts.headers as Record<string, string> | undefined,
    Accept: "application/json",
  };
  if (payload) {
    headers["Content-Type"] = payload.type;
    headers["Content-Length"] = String(Buffer.byteLength(payload.text));
  }
  const what = `${method} ${path}`;
  const request = url.protocol === "http:" ? http.request : https.request;
  return await new Promise<string>((resolve, reject) => {
    const req = request(url, { ...opts, method, headers }, (res) => {
      const code = res.statusCode ?? 0;
      const ok = code >= 200 && code < 300;
      res.on("error", reject);
      if (ok && !wantBody) {
        res.on("end", () => resolve(""));
        res.resume(); // the returned object is not needed: drain it, keep the connection
        return;
      }
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        if (ok) return resolve(text);
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch { /* not JSON: the text */ }
        const h: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) {
          if (v !== undefined) h[k.toLowerCase()] = Array.isArray(v) ? v.join(", ") : v;
        }
        reject(new ApiWriteError(code, body, h, what));
      });
    });
    req.setTimeout(REQUEST_TIMEOUT_MS, () => {
      req.destroy(new Error(`No answer to ${what} within ${REQUEST_TIMEOUT_MS} ms`));
    });
    req.on("error", reject);
    req.end(payload?.text);
  });
}
