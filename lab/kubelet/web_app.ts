/**
 * The test application of the lab kubelet's cluster: Deployment `default/web` whose pods run
 * `lab/clients/lb_peer.ts server` (each answers with its pod name; `targetPort` is the named port
 * `http`, 8080) behind LoadBalancer Service `web` of Holdfast's class on port 80. Shared by the
 * kubelet e2e tests and `bench:backend`.
 *
 * @module
 */

/** Options of {@linkcode webApp}. */
export interface WebAppOptions {
  /** The pods' listen address: `0.0.0.0` (default) or `::` (both families). */
  readonly listen?: string;
  /** `terminationGracePeriodSeconds` (unset: Kubernetes' default). */
  readonly gracePeriodS?: number;
  /** The server's `drain` mode: it keeps answering open connections after SIGTERM. */
  readonly drain?: boolean;
  /** A RequireDualStack Service (IPv4 and IPv6 addresses). */
  readonly dualStack?: boolean;
}

/** The Deployment (of `replicas` pods) and its Service, as `kubectl apply` takes them. */
export function webApp(replicas: number, o: WebAppOptions = {}): Record<string, unknown>[] {
  return [{
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "default" },
    spec: {
      replicas,
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: {
          ...(o.gracePeriodS === undefined
            ? {}
            : { terminationGracePeriodSeconds: o.gracePeriodS }),
          containers: [{
            name: "web",
            image: "holdfast:dev",
            workingDir: "/opt/holdfast",
            command: ["deno", "run", "--allow-net", "lab/clients/lb_peer.ts"],
            args: [
              "server",
              "$(POD_NAME)",
              o.listen ?? "0.0.0.0",
              "8080",
              ...(o.drain ? ["drain"] : []),
            ],
            env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
            ports: [{ name: "http", containerPort: 8080 }],
            readinessProbe: { tcpSocket: { port: "http" }, periodSeconds: 1 },
          }],
        },
      },
    },
  }, {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "default" },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "holdfast.io/lb",
      ...(o.dualStack ? { ipFamilyPolicy: "RequireDualStack", ipFamilies: ["IPv4", "IPv6"] } : {}),
      selector: { app: "web" },
      ports: [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }],
    },
  }];
}
