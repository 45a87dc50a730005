/**
 * Client-side helpers for talking to a {@linkcode KubeServer} with `@kubernetes/client-node`, as
 * the benches, tests and the lab do: a KubeConfig for it, and Holdfast objects they create often.
 *
 * @module
 */

import * as k8s from "@kubernetes/client-node";
import type { KubeServer } from "./server.ts";

/** A client-node KubeConfig whose current context is `server` (written to a temp kubeconfig). */
export async function kubeConfigFor(server: KubeServer): Promise<k8s.KubeConfig> {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(await server.writeKubeconfig());
  return kc;
}

/** One block of an AddressPool: a CIDR or an inclusive start..stop range. */
export type AddressBlock = { cidr: string } | { start: string; stop: string };

/** Creates the cluster-scoped AddressPool `name` with `blocks` (docs/ipam.md). */
export function createAddressPool(
  kc: k8s.KubeConfig,
  name: string,
  blocks: readonly AddressBlock[],
  spec: { autoAssign?: boolean; avoidBuggyIPs?: boolean } = {},
): Promise<unknown> {
  return kc.makeApiClient(k8s.CustomObjectsApi).createClusterCustomObject({
    group: "holdfast.io",
    version: "v1alpha1",
    plural: "addresspools",
    body: {
      apiVersion: "holdfast.io/v1alpha1",
      kind: "AddressPool",
      metadata: { name },
      spec: { blocks, ...spec },
    },
  });
}
