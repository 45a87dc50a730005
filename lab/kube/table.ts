/**
 * `meta.k8s.io/v1` Table responses, as `kubectl get` asks for them
 * (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): a CRD's additionalPrinterColumns
 * (JSONPath subset: `.a.b`, `[n]`, `[*]`, `[?(@.f=="v")]`), Name and Age for the rest, and a few
 * columns for Services (Type, Cluster-IP, External-IP, Port(s)) and v1 Events (Last Seen, Type,
 * Reason, Object, Message) since operators read them.
 *
 * @module
 */
import type { Obj, PrinterColumn, ResourceType } from "./resources.ts";
import { badRequest } from "./status.ts";

/** Kubernetes' short human duration (`45s`, `3m12s`, `5h`, `2d3h`), as `kubectl get` shows Age. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 192) {
    return hours % 24 === 0
      ? `${Math.floor(hours / 24)}d`
      : `${Math.floor(hours / 24)}d${hours % 24}h`;
  }
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const years = Math.floor(hours / 24 / 365);
  const days = Math.floor(hours / 24) % 365;
  return hours < 24 * 365 * 8 && days !== 0 ? `${years}y${days}d` : `${years}y`;
}

function age(ts: unknown): string {
  const t = Date.parse(String(ts ?? ""));
  return Number.isNaN(t) ? "<unknown>" : humanDuration(Date.now() - t);
}

/** Evaluates a printer-column JSONPath; throws a 400 for syntax it does not read. */
export function jsonPath(obj: unknown, path: string): unknown[] {
  const tokens = path.match(/\.[^.[\]]+|\[[^\]]*\]/g) ?? [];
  if (tokens.join("") !== path) {
    throw badRequest(`unsupported JSONPath "${path}" in a printer column`);
  }
  let cur: unknown[] = [obj];
  for (const t of tokens) {
    const next: unknown[] = [];
    for (const v of cur) {
      if (t.startsWith(".")) {
        if (
          v && typeof v === "object" && !Array.isArray(v) && (v as Obj)[t.slice(1)] !== undefined
        ) next.push((v as Obj)[t.slice(1)]);
      } else if (Array.isArray(v)) {
        const inner = t.slice(1, -1);
        const filter = inner.match(/^\?\(@\.([\w.]+)\s*==\s*["']([^"']*)["']\)$/);
        if (inner === "*") next.push(...v);
        else if (/^\d+$/.test(inner)) v[Number(inner)] !== undefined && next.push(v[Number(inner)]);
        else if (filter) {
          next.push(...v.filter((e) => jsonPath(e, `.${filter[1]}`)[0] === filter[2]));
        } else throw badRequest(`unsupported JSONPath "${path}" in a printer column`);
      }
    }
    cur = next;
  }
  return cur;
}

interface Column extends PrinterColumn {
  readonly cell: (obj: Obj) => unknown;
}

function nameColumn(): Column {
  return {
    name: "Name",
    type: "string",
    format: "name",
    jsonPath: ".metadata.name",
    description: "Name must be unique within a namespace.",
    cell: (o) => (o.metadata as Obj).name,
  };
}

function ageColumn(): Column {
  return {
    name: "Age",
    type: "string",
    jsonPath: ".metadata.creationTimestamp",
    description:
      "CreationTimestamp is a timestamp representing the server time when this object was created.",
    cell: (o) => age((o.metadata as Obj).creationTimestamp),
  };
}

function serviceColumns(): Column[] {
  const spec = (o: Obj) => (o.spec ?? {}) as Obj;
  const ingress = (o: Obj) =>
    ((((o.status ?? {}) as Obj).loadBalancer ?? {}) as Obj).ingress as Obj[] | undefined;
  const col = (name: string, cell: (o: Obj) => unknown): Column => ({
    name,
    type: "string",
    jsonPath: "",
    cell,
  });
  return [
    nameColumn(),
    col("Type", (o) => spec(o).type),
    col("Cluster-IP", (o) => spec(o).clusterIP ?? "<none>"),
    col("External-IP", (o) => {
      const ips = (ingress(o) ?? []).map((i) => i.ip ?? i.hostname).filter(Boolean);
      if (ips.length) return ips.join(",");
      return spec(o).type === "LoadBalancer" ? "<pending>" : "<none>";
    }),
    col(
      "Port(s)",
      (o) =>
        ((spec(o).ports ?? []) as Obj[]).map((p) =>
          `${p.port}${p.nodePort ? `:${p.nodePort}` : ""}/${p.protocol ?? "TCP"}`
        ).join(",") || "<none>",
    ),
    ageColumn(),
  ];
}

function eventColumns(): Column[] {
  const col = (name: string, cell: (o: Obj) => unknown): Column => ({
    name,
    type: "string",
    jsonPath: "",
    cell,
  });
  const lastSeen = (o: Obj) => {
    const series = (o.series ?? {}) as Obj;
    return age(
      series.lastObservedTime ?? o.lastTimestamp ?? o.eventTime ??
        (o.metadata as Obj).creationTimestamp,
    );
  };
  const object = (o: Obj) => {
    const ref = (o.involvedObject ?? {}) as Obj;
    return `${String(ref.kind ?? "").toLowerCase()}/${ref.name ?? ""}`;
  };
  return [
    col("Last Seen", lastSeen),
    col("Type", (o) => o.type ?? ""),
    col("Reason", (o) => o.reason ?? ""),
    col("Object", object),
    col("Message", (o) => o.message ?? ""),
  ];
}

function cellOf(col: PrinterColumn, obj: Obj): unknown {
  const values = jsonPath(obj, col.jsonPath);
  if (values.length === 0) return null;
  const v = values.length === 1 ? values[0] : values;
  if (col.type === "date") return age(v);
  if (typeof v === "object") return JSON.stringify(v);
  if (col.type === "string") return String(v);
  return v;
}

function columnsOf(type: ResourceType): Column[] {
  if (type.custom && type.printerColumns && type.printerColumns.length > 0) {
    return [
      nameColumn(),
      ...type.printerColumns.map((c) => ({ ...c, cell: (o: Obj) => cellOf(c, o) })),
    ];
  }
  if (type.kind === "Service" && type.group === "") return serviceColumns();
  if (type.kind === "Event" && type.group === "") return eventColumns();
  return [nameColumn(), ageColumn()];
}

/** What each row carries as `object` (`includeObject` query parameter). */
export type IncludeObject = "None" | "Metadata" | "Object";

/** A Table of `objects` of `type` with the list's metadata. */
export function toTable(
  type: ResourceType,
  objects: readonly Obj[],
  listMeta: Obj,
  include: IncludeObject,
): Obj {
  const columns = columnsOf(type);
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: listMeta,
    columnDefinitions: columns.map((c) => ({
      name: c.name,
      type: c.type,
      format: c.format ?? "",
      description: c.description ?? "",
      priority: c.priority ?? 0,
    })),
    rows: objects.map((o) => ({
      cells: columns.map((c) => c.cell(o) ?? null),
      object: include === "None"
        ? undefined
        : include === "Object"
        ? o
        : { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata },
    })),
  };
}
