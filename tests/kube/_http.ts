/**
 * Plain-HTTP helpers for the kube tests: one request with its JSON body, and the events of a
 * watch stream.
 *
 * @module
 */
import type { KubeServer } from "../../lab/kube/mod.ts";

/** Response bodies, read loosely as tests do. */
// deno-lint-ignore no-explicit-any
export type Json = Record<string, any>;

/** One request to the server; the body parsed when it is JSON. */
export async function call(
  server: KubeServer,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ code: number; body: Json }> {
  const res = await fetch(server.url + path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { code: res.status, body: text.startsWith("{") ? JSON.parse(text) : { text } };
}

/** Reads watch events until `count` arrived or the stream ends; cancels the stream. */
export async function readEvents(res: Response, count: number, timeoutMs = 3000): Promise<Json[]> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const events: Json[] = [];
  let buffer = "";
  const timer = setTimeout(() => reader.cancel(), timeoutMs);
  try {
    while (events.length < count) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      for (const l of lines) if (l.trim()) events.push(JSON.parse(l));
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => {});
  }
  return events;
}

/** The ConfigMaps collection of namespace default. */
export const CM = "/api/v1/namespaces/default/configmaps";
