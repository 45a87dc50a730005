/**
 * Resource requests: one function per verb, from a parsed URL to a Response, with content
 * negotiation (JSON, Table, PartialObjectMetadata; protobuf only refused), patch formats by
 * Content-Type, query parameters checked (an unsupported value is a 400, never ignored).
 *
 * @module
 */
import { parse as parseYaml } from "yaml";
import { apiVersionOf, type Obj, type ResourceType } from "./resources.ts";
import { PATCH_TYPES, type Rest, type WriteOptions, type WriteResult } from "./rest.ts";
import type { Lister } from "./list.ts";
import type { Store } from "./store.ts";
import { type Matcher, parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { type IncludeObject, toTable } from "./table.ts";
import { watchStream } from "./watch.ts";
import { type PropagationPolicy, readPolicy } from "./gc.ts";
import { ApiError, badRequest, notAllowed, statusObject, unsupportedMediaType } from "./status.ts";

/** A request for a resource: type, namespace (undefined: all), name and subresource. */
export interface Target {
  readonly type: ResourceType;
  readonly namespace?: string;
  readonly name?: string;
  readonly subresource?: "status";
}

/** What the handlers need from the server. */
export interface HandlerContext {
  readonly rest: Rest;
  readonly lister: Lister;
  readonly store: Store;
  readonly bookmarkIntervalMs: number;
  readonly maxWatchSeconds: number;
  /** Aborts when the server ends every open watch. */
  readonly watchSignal: () => AbortSignal;
}

type Format = { kind: "json" } | { kind: "table"; include: IncludeObject } | { kind: "partial" };

/** A JSON response. */
export function json(code: number, body: unknown, warnings: readonly string[] = []): Response {
  const headers = new Headers({
    "content-type": "application/json",
    "cache-control": "no-cache, private",
  });
  for (const w of warnings) headers.append("warning", `299 - ${JSON.stringify(w)}`);
  return new Response(JSON.stringify(body), { status: code, headers });
}

function negotiate(req: Request, url: URL): Format {
  const accept = req.headers.get("accept") ?? "";
  if (accept === "") return { kind: "json" };
  const offers = accept.split(",").map((s) => s.trim());
  for (const offer of offers) {
    const [media, ...params] = offer.split(";").map((s) => s.trim());
    const p = Object.fromEntries(
      params.map((x) => x.split("=").map((s) => s.trim()) as [string, string]),
    );
    if (media !== "application/json" && media !== "*/*" && media !== "application/*") continue;
    if (p.as === undefined) return { kind: "json" };
    if (p.g === "meta.k8s.io" && p.v === "v1" && p.as === "Table") {
      const inc = url.searchParams.get("includeObject") ?? "Metadata";
      if (!["None", "Metadata", "Object"].includes(inc)) {
        throw badRequest(`invalid includeObject "${inc}"`);
      }
      return { kind: "table", include: inc as IncludeObject };
    }
    if (
      p.g === "meta.k8s.io" && p.v === "v1" &&
      (p.as === "PartialObjectMetadata" || p.as === "PartialObjectMetadataList")
    ) {
      return { kind: "partial" };
    }
  }
  throw new ApiError(
    406,
    "NotAcceptable",
    `only the following media types are accepted: application/json (with as=Table or as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1); got "${accept}"`,
  );
}

function withVersion(type: ResourceType, obj: Obj): Obj {
  return { ...obj, apiVersion: apiVersionOf(type), kind: type.kind };
}

function render(type: ResourceType, format: Format, obj: Obj): unknown {
  if (format.kind === "table") {
    return toTable(
      type,
      [obj],
      { resourceVersion: (obj.metadata as Obj).resourceVersion },
      format.include,
    );
  }
  if (format.kind === "partial") {
    return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: obj.metadata };
  }
  return withVersion(type, obj);
}

function matcher(t: Target, url: URL): Matcher {
  const labels = parseLabelSelector(url.searchParams.get("labelSelector"));
  const fields = parseFieldSelector(url.searchParams.get("fieldSelector"), t.type.fieldSelectors);
  return (o) => labels(o) && fields(o);
}

function flag(url: URL, name: string): boolean {
  const v = url.searchParams.get(name);
  if (v === null || v === "" || v === "false" || v === "0") return false;
  if (v === "true" || v === "1") return true;
  throw badRequest(`invalid value "${v}" for query parameter ${name} (true or false)`);
}

function writeOptions(req: Request, url: URL, sub?: "status"): WriteOptions {
  const dry = url.searchParams.getAll("dryRun");
  if (dry.some((d) => d !== "All")) {
    throw badRequest(`unsupported dryRun value "${dry.join(",")}" (only "All")`);
  }
  const fv = url.searchParams.get("fieldValidation") ?? "";
  if (!["", "Strict", "Warn", "Ignore"].includes(fv)) {
    throw badRequest(`invalid fieldValidation "${fv}" (Strict, Warn or Ignore)`);
  }
  const ua = req.headers.get("user-agent") ?? "unknown";
  const manager = url.searchParams.get("fieldManager") ?? ua.split("/")[0] ?? "unknown";
  return { manager, dryRun: dry.length > 0, fieldValidation: fv || "Warn", subresource: sub };
}

async function readBody(req: Request, yaml = false): Promise<unknown> {
  const ct = (req.headers.get("content-type") ?? "application/json").split(";")[0]!.trim();
  if (!yaml && ct !== "application/json" && !ct.endsWith("+json") && ct !== "") {
    throw unsupportedMediaType(ct, ["application/json", "application/yaml (apply patches only)"]);
  }
  const text = await req.text();
  if (text.trim() === "") throw badRequest("the request has no body");
  try {
    return yaml ? parseYaml(text) : JSON.parse(text);
  } catch (e) {
    throw badRequest(
      `couldn't parse the request body as ${yaml ? "YAML" : "JSON"}: ${(e as Error).message}`,
    );
  }
}

function written(t: Target, format: Format, r: WriteResult): Response {
  return json(r.created ? 201 : 200, render(t.type, format, r.object), r.warnings);
}

function list(ctx: HandlerContext, t: Target, url: URL, format: Format): Response {
  const page = ctx.lister.list(t.type, {
    namespace: t.namespace,
    match: matcher(t, url),
    resourceVersion: url.searchParams.get("resourceVersion"),
    resourceVersionMatch: url.searchParams.get("resourceVersionMatch"),
    limit: url.searchParams.get("limit"),
    continueToken: url.searchParams.get("continue"),
  });
  if (format.kind === "table") {
    return json(200, toTable(t.type, page.items, page.metadata, format.include));
  }
  if (format.kind === "partial") {
    const items = page.items.map((o) => render(t.type, format, o));
    return json(200, {
      kind: "PartialObjectMetadataList",
      apiVersion: "meta.k8s.io/v1",
      metadata: page.metadata,
      items,
    });
  }
  const items = page.items.map((o) => t.type.custom ? withVersion(t.type, o) : stripTypeMeta(o));
  return json(200, {
    kind: `${t.type.kind}List`,
    apiVersion: apiVersionOf(t.type),
    metadata: page.metadata,
    items,
  });
}

function stripTypeMeta(o: Obj): Obj {
  const { apiVersion: _a, kind: _k, ...rest } = o;
  return rest;
}

function watch(ctx: HandlerContext, t: Target, url: URL, format: Format): Response {
  const rv = url.searchParams.get("resourceVersion") ?? "";
  if (rv !== "" && !/^\d+$/.test(rv)) {
    throw badRequest(`invalid resourceVersion "${rv}": not an integer`);
  }
  const timeoutText = url.searchParams.get("timeoutSeconds") ?? "";
  if (timeoutText !== "" && !/^\d+$/.test(timeoutText)) {
    throw badRequest(`invalid timeoutSeconds "${timeoutText}"`);
  }
  const timeout = Math.min(
    Number(timeoutText || ctx.maxWatchSeconds) || ctx.maxWatchSeconds,
    ctx.maxWatchSeconds,
  );
  const initial = flag(url, "sendInitialEvents");
  if (initial && url.searchParams.get("resourceVersionMatch") !== "NotOlderThan") {
    throw badRequest("sendInitialEvents requires resourceVersionMatch=NotOlderThan");
  }
  if (!initial && url.searchParams.get("resourceVersionMatch")) {
    throw badRequest(
      "resourceVersionMatch is only allowed on a watch together with sendInitialEvents=true",
    );
  }
  const stream = watchStream(ctx.store, {
    type: t.type,
    namespace: t.namespace,
    match: matcher(t, url),
    resourceVersion: rv,
    timeoutMs: timeout * 1000,
    bookmarks: flag(url, "allowWatchBookmarks"),
    bookmarkIntervalMs: ctx.bookmarkIntervalMs,
    sendInitialEvents: initial,
    encode: (obj) => render(t.type, format, obj),
    signal: ctx.watchSignal(),
  });
  return new Response(stream, {
    status: 200,
    headers: { "content-type": "application/json", "cache-control": "no-cache, private" },
  });
}

function patchType(req: Request): "merge" | "json" | "strategic" | "apply" {
  const ct = (req.headers.get("content-type") ?? "").split(";")[0]!.trim();
  const types: Record<string, "merge" | "json" | "strategic" | "apply"> = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
  };
  const t = types[ct];
  if (!t) throw unsupportedMediaType(ct, PATCH_TYPES);
  return t;
}

async function remove(ctx: HandlerContext, t: Target, req: Request, url: URL): Promise<Response> {
  const text = await req.text();
  const opts = (text.trim() ? JSON.parse(text) : {}) as Obj;
  const policy = readPolicy(
    url.searchParams.get("propagationPolicy") ?? opts.propagationPolicy ??
      (opts.orphanDependents === true ? "Orphan" : undefined),
  );
  if (!["Background", "Foreground", "Orphan"].includes(policy)) throw badRequest(policy);
  const dryRun = url.searchParams.get("dryRun") === "All" ||
    ((opts.dryRun ?? []) as string[]).includes("All");
  const { object, pending } = ctx.rest.delete(t.type, t.namespace ?? "", t.name!, {
    dryRun,
    preconditions: opts.preconditions as Obj | undefined,
    propagationPolicy: policy as PropagationPolicy,
  });
  if (pending) return json(200, withVersion(t.type, object));
  const meta = object.metadata as Obj;
  return json(
    200,
    statusObject(200, "", "", {
      name: String(meta.name),
      group: t.type.group,
      kind: t.type.plural,
      uid: String(meta.uid),
    }),
  );
}

/** Handles a request for a resource (collection, object or /status). */
export async function handleResource(
  ctx: HandlerContext,
  req: Request,
  url: URL,
  t: Target,
): Promise<Response> {
  const format = negotiate(req, url);
  const ns = t.namespace ?? "";
  const m = req.method;
  if (t.name === undefined) {
    if (m === "GET") {
      return flag(url, "watch") ? watch(ctx, t, url, format) : list(ctx, t, url, format);
    }
    if (m === "POST") {
      if (t.namespace === undefined && t.type.namespaced) {
        throw notAllowed(`create ${t.type.plural}: POST needs a namespace in the path`);
      }
      return written(
        t,
        format,
        ctx.rest.create(t.type, ns, await readBody(req), writeOptions(req, url)),
      );
    }
    if (m === "DELETE") {
      const match = matcher(t, url);
      const gone = ctx.lister.list(t.type, { namespace: t.namespace, match }).items.map((o) =>
        ctx.rest.delete(
          t.type,
          String((o.metadata as Obj).namespace ?? ""),
          String((o.metadata as Obj).name),
        ).object
      );
      return json(200, {
        kind: `${t.type.kind}List`,
        apiVersion: apiVersionOf(t.type),
        metadata: { resourceVersion: String(ctx.store.resourceVersion) },
        items: gone,
      });
    }
    throw notAllowed(`${m} is not supported on the collection ${t.type.plural}`);
  }
  if (flag(url, "watch")) {
    throw badRequest(
      "watch on a single object: use the collection with fieldSelector=metadata.name=NAME",
    );
  }
  switch (m) {
    case "GET":
      return json(200, render(t.type, format, ctx.rest.get(t.type, ns, t.name)));
    case "PUT":
      return written(
        t,
        format,
        ctx.rest.update(
          t.type,
          ns,
          t.name,
          await readBody(req),
          writeOptions(req, url, t.subresource),
        ),
      );
    case "PATCH": {
      const kind = patchType(req);
      const opts = writeOptions(req, url, t.subresource);
      const body = await readBody(req, kind === "apply");
      if (kind !== "apply") {
        if (url.searchParams.has("force")) {
          throw badRequest("force is only allowed for apply patches");
        }
        return written(t, format, ctx.rest.patch(t.type, ns, t.name, kind, body, opts));
      }
      if (!url.searchParams.get("fieldManager")) {
        throw new ApiError(
          422,
          "Invalid",
          'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
        );
      }
      return written(
        t,
        format,
        ctx.rest.apply(t.type, ns, t.name, body, { ...opts, force: flag(url, "force") }),
      );
    }
    case "DELETE":
      if (t.subresource) throw notAllowed(`DELETE is not supported on ${t.type.plural}/status`);
      return await remove(ctx, t, req, url);
    default:
      throw notAllowed(
        `${m} is not supported on ${t.type.plural}${t.subresource ? "/status" : ""}`,
      );
  }
}
