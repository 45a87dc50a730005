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

/**
 * Reads watch events until `count` arrived, the server ends the stream (`ended`), or `timeoutMs`
 * passes; cancels the stream. Returns as soon as the events arrive, so the limit is generous.
 */
export async function readWatch(
  res: Response,
  count: number,
  timeoutMs = 30_000,
): Promise<{ events: Json[]; ended: boolean }> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const events: Json[] = [];
  let buffer = "";
  let timedOut = false;
  let ended = false;
  const timer = setTimeout(() => {
    timedOut = true;
    reader.cancel().catch(() => {});
  }, timeoutMs);
  try {
    while (events.length < count) {
      const { value, done } = await reader.read();
      if (done) {
        ended = !timedOut;
        break;
      }
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      for (const l of lines) if (l.trim()) events.push(JSON.parse(l));
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => {});
  }
  return { events, ended };
}

/** The events of {@link readWatch} alone. */
export async function readEvents(
  res: Response,
  count: number,
  timeoutMs = 30_000,
): Promise<Json[]> {
  return (await readWatch(res, count, timeoutMs)).events;
}

/** The ConfigMaps collection of namespace default. */
export const CM = "/api/v1/namespaces/default/configmaps";
