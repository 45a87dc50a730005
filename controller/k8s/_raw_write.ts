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
 * A refused write throws {@linkcode ApiWriteError} with the HTTP status as `code`, the parsed
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

/** A write the API server refused: `code` is its HTTP status. */
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
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("No currently active cluster");
  const url = new URL(cluster.server.replace(/\/+$/, "") + w.path);
  for (const [k, v] of Object.entries(w.query ?? {})) url.searchParams.set(k, v);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts); // credentials, TLS settings and the (kept-alive) agent
  const payload = JSON.stringify(w.body);
  const headers = {
    ...opts.headers as Record<string, string> | undefined,
    "Content-Type": w.contentType,
    Accept: "application/json",
    "Content-Length": String(Buffer.byteLength(payload)),
  };
  const what = `${w.method} ${w.path}`;
  const send = url.protocol === "http:" ? http.request : https.request;
  await new Promise<void>((resolve, reject) => {
    const req = send(url, { ...opts, method: w.method, headers }, (res) => {
      const code = res.statusCode ?? 0;
      if (code >= 200 && code < 300) {
        res.on("error", reject);
        res.on("end", resolve);
        res.resume(); // the returned object is not needed: drain it, keep the connection
        return;
      }
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
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
    req.end(payload);
  });
}
