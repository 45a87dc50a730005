/**
 * Reads every manifest under `k8s/` (top level, `crds/`, `examples/`) with the file it came from,
 * and walks the containers of workloads, for the manifest tests.
 *
 * @module
 */
import { parseAllDocuments } from "yaml";

/** The k8s/ directory (absolute, with a trailing slash). */
export const K8S = new URL("../../k8s/", import.meta.url).pathname;

/** A Kubernetes object as parsed from YAML. */
// deno-lint-ignore no-explicit-any
export type Obj = Record<string, any>;

/** One object and the file (relative to k8s/) it came from. */
export interface Manifest {
  readonly file: string;
  readonly obj: Obj;
}

/** Every YAML document of every `.yaml` file in k8s/, k8s/crds and k8s/examples, by file name. */
export async function readManifests(): Promise<Manifest[]> {
  const out: Manifest[] = [];
  for (const dir of ["", "crds/", "examples/"]) {
    const names: string[] = [];
    for await (const e of Deno.readDir(`${K8S}${dir}`)) {
      if (e.isFile && e.name.endsWith(".yaml")) names.push(e.name);
    }
    for (const name of names.sort()) {
      const file = `${dir}${name}`;
      const docs = parseAllDocuments(await Deno.readTextFile(`${K8S}${file}`));
      for (const doc of Array.isArray(docs) ? docs : [docs]) {
        if (doc.errors.length > 0) {
          throw new Error(`Cannot parse k8s/${file}: ${doc.errors[0]!.message}`);
        }
        const obj = doc.toJS() as Obj | null;
        if (obj !== null) out.push({ file, obj });
      }
    }
  }
  return out;
}

/** The objects of one kind (and name, when given). */
export function ofKind(all: readonly Manifest[], kind: string, name?: string): Obj[] {
  return all.map((m) => m.obj).filter((o) =>
    o.kind === kind && (name === undefined || o.metadata?.name === name)
  );
}

/** The one object of this kind and name; throws when there is not exactly one. */
export function one(all: readonly Manifest[], kind: string, name: string): Obj {
  const found = ofKind(all, kind, name);
  if (found.length !== 1) throw new Error(`Expected one ${kind} "${name}", found ${found.length}`);
  return found[0]!;
}

/** Every container (and init container) of every workload, with the workload it belongs to. */
export function containers(all: readonly Manifest[]): { workload: Obj; container: Obj }[] {
  return all.map((m) => m.obj)
    .filter((o) => ["Deployment", "DaemonSet", "StatefulSet", "Pod"].includes(o.kind))
    .flatMap((workload) => {
      const spec = workload.kind === "Pod" ? workload.spec : workload.spec.template.spec;
      return [...(spec.initContainers ?? []), ...spec.containers].map((container: Obj) => ({
        workload,
        container,
      }));
    });
}

/** The pod spec of a workload. */
export function podSpec(workload: Obj): Obj {
  return workload.kind === "Pod" ? workload.spec : workload.spec.template.spec;
}
