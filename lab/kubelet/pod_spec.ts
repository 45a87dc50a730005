/**
 * What the lab kubelet runs for a Pod: each container's command line, environment, volumes and
 * readiness probe, read from the Pod's spec as a kubelet reads it. The image is this repository
 * (scripts/image.ts builds it from Debian, the pinned deno and this tree: `WORKDIR /opt/holdfast`,
 * `ENTRYPOINT ["deno"]`), so `/opt/holdfast` is the checkout and `deno` the pinned deno running
 * this process. Anything a Pod asks for that the lab cannot give fails loudly, naming the pod.
 *
 * @module
 */

import type { Obj } from "../kube/mod.ts";

const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
const IMAGE_WORKDIR = "/opt/holdfast";
const IMAGE_ENV = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: "/root",
  DENO_DIR: "/tmp/deno-dir",
};

/** Where a pod runs and what it was given. */
export interface PodPlace {
  readonly nodeName: string;
  readonly hostIP: string;
  readonly podIP: string;
  /** Every address of the node / pod, primary first (dual stack: IPv4, IPv6). */
  readonly hostIPs?: readonly string[];
  readonly podIPs?: readonly string[];
  /** The node's bpffs (the host path `/sys/fs/bpf` on that node). */
  readonly bpffs: string;
  /** A directory of the pod's own (emptyDir and secret volumes). */
  readonly dir: string;
  /** The kubeconfig of the API server (the lab's stand-in for the in-cluster service account). */
  readonly kubeconfig: string;
  /** A Secret's data (base64 values) by namespace and name; undefined when missing. */
  readonly secret: (namespace: string, name: string) => Record<string, string> | undefined;
}

/** A readiness probe as the prober runs it. */
export interface ProbeSpec {
  readonly kind: "http" | "tcp";
  readonly host: string;
  readonly port: number;
  readonly path?: string;
  readonly periodSeconds: number;
  /** Consecutive failures before the container is not ready (Kubernetes' default 3). */
  readonly failureThreshold: number;
}

/** One container to start. */
export interface ContainerRun {
  readonly name: string;
  readonly argv: string[];
  readonly env: Record<string, string>;
  readonly cwd: string;
  readonly mounts: { source: string; target: string }[];
  readonly readiness?: ProbeSpec;
}

type Any = Record<string, unknown>;
const o = (v: unknown): Any => (v ?? {}) as Any;

/** Kubernetes' `$(VAR)` expansion (`$$(VAR)` stays literal). */
export function expand(text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name?: string) => {
    if (m === "$$") return "$";
    return name !== undefined && name in env ? env[name]! : m;
  });
}

function fail(pod: Obj, what: string): never {
  const m = o(pod.metadata);
  throw new Error(`pod ${m.namespace}/${m.name}: ${what} (the lab kubelet does not support it)`);
}

function fieldValue(pod: Obj, place: PodPlace, path: string): string {
  const m = o(pod.metadata), s = o(pod.spec);
  const values: Record<string, unknown> = {
    "metadata.name": m.name,
    "metadata.namespace": m.namespace,
    "metadata.uid": m.uid,
    "spec.nodeName": place.nodeName,
    "spec.serviceAccountName": s.serviceAccountName ?? "default",
    "status.podIP": place.podIP,
    "status.hostIP": place.hostIP,
    "status.podIPs": (place.podIPs ?? [place.podIP]).join(","),
    "status.hostIPs": (place.hostIPs ?? [place.hostIP]).join(","),
  };
  if (!(path in values)) fail(pod, `fieldRef ${path}`);
  return String(values[path]);
}

async function volumes(pod: Obj, place: PodPlace): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const ns = String(o(pod.metadata).namespace);
  for (const v of (o(pod.spec).volumes ?? []) as Any[]) {
    const name = String(v.name), dir = `${place.dir}/vol-${name}`;
    if (v.hostPath) {
      const path = String(o(v.hostPath).path);
      if (path !== "/sys/fs/bpf") fail(pod, `hostPath ${path}`);
      out.set(name, place.bpffs);
    } else if (v.emptyDir) {
      await Deno.mkdir(dir, { recursive: true });
      out.set(name, dir);
    } else if (v.secret) {
      const sec = o(v.secret), secretName = String(sec.secretName);
      const data = place.secret(ns, secretName);
      if (data === undefined) throw new Error(`pod ${ns}: Secret ${secretName} not found`);
      await Deno.mkdir(dir, { recursive: true });
      const items = (sec.items as Any[] | undefined) ??
        Object.keys(data).map((key) => ({ key, path: key }));
      for (const it of items) {
        const value = data[String(it.key)];
        if (value === undefined) throw new Error(`Secret ${secretName} has no key ${it.key}`);
        const file = `${dir}/${it.path}`;
        await Deno.writeFile(file, Uint8Array.from(atob(value), (ch) => ch.charCodeAt(0)));
        await Deno.chmod(file, Number(sec.defaultMode ?? 0o644));
      }
      out.set(name, dir);
    } else fail(pod, `volume ${name} of this type`);
  }
  return out;
}

function containerEnv(pod: Obj, place: PodPlace, c: Any): Record<string, string> {
  const env: Record<string, string> = {
    ...IMAGE_ENV,
    HOSTNAME: String(o(pod.metadata).name),
    KUBECONFIG: place.kubeconfig,
  };
  const ns = String(o(pod.metadata).namespace);
  for (const e of (c.env ?? []) as Any[]) {
    const name = String(e.name);
    if (e.value !== undefined) env[name] = expand(String(e.value), env);
    else if (o(e.valueFrom).fieldRef) {
      env[name] = fieldValue(pod, place, String(o(o(e.valueFrom).fieldRef).fieldPath));
    } else if (o(e.valueFrom).secretKeyRef) {
      const ref = o(o(e.valueFrom).secretKeyRef);
      const v = place.secret(ns, String(ref.name))?.[String(ref.key)];
      if (v === undefined) throw new Error(`pod ${ns}: Secret ${ref.name} key ${ref.key} missing`);
      env[name] = atob(v);
    } else fail(pod, `env ${name}'s source`);
  }
  return env;
}

function portOf(pod: Obj, c: Any, port: unknown): number {
  if (typeof port === "number") return port;
  const named = ((c.ports ?? []) as Any[]).find((p) => p.name === port);
  if (named === undefined) fail(pod, `probe port ${String(port)}`);
  return Number(named.containerPort);
}

function readiness(pod: Obj, place: PodPlace, c: Any): ProbeSpec | undefined {
  const p = c.readinessProbe as Any | undefined;
  if (p === undefined) return undefined;
  const periodSeconds = Number(p.periodSeconds ?? 10);
  const failureThreshold = Number(p.failureThreshold ?? 3);
  if (p.httpGet) {
    const h = o(p.httpGet);
    const host = String(h.host ?? place.podIP), port = portOf(pod, c, h.port);
    return {
      kind: "http",
      host,
      port,
      path: String(h.path ?? "/"),
      periodSeconds,
      failureThreshold,
    };
  }
  if (p.tcpSocket) {
    const t = o(p.tcpSocket);
    return {
      kind: "tcp",
      host: String(t.host ?? place.podIP),
      port: portOf(pod, c, t.port),
      periodSeconds,
      failureThreshold,
    };
  }
  fail(pod, "a readiness probe other than httpGet or tcpSocket");
}

/** The containers of `pod` as they are to run at `place`. */
export async function containerRuns(pod: Obj, place: PodPlace): Promise<ContainerRun[]> {
  const spec = o(pod.spec);
  if (((spec.initContainers ?? []) as unknown[]).length > 0) fail(pod, "initContainers");
  const vols = await volumes(pod, place);
  return ((spec.containers ?? []) as Any[]).map((c) => {
    const env = containerEnv(pod, place, c);
    const words = [...((c.command ?? ["deno"]) as string[]), ...((c.args ?? []) as string[])]
      .map((w) => expand(String(w), env));
    if (words[0] === "deno") words[0] = Deno.execPath();
    const workdir = String(c.workingDir ?? IMAGE_WORKDIR);
    if (!workdir.startsWith(IMAGE_WORKDIR)) fail(pod, `workingDir ${workdir}`);
    const mounts = ((c.volumeMounts ?? []) as Any[]).map((m) => {
      const source = vols.get(String(m.name));
      if (source === undefined) fail(pod, `volumeMount of unknown volume ${m.name}`);
      return { source, target: String(m.mountPath) };
    });
    return {
      name: String(c.name),
      argv: words,
      env,
      cwd: REPO + workdir.slice(IMAGE_WORKDIR.length),
      mounts,
      readiness: readiness(pod, place, c),
    };
  });
}
