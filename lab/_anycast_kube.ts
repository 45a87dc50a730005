/**
 * Reaching the test's Kubernetes API server (lab/kube/, on the root namespace's loopback) from
 * the anycast lab's node namespaces without routing anything into the root namespace: a relay
 * whose listening socket is created inside the node namespace (`Deno.listen` is synchronous, so
 * it runs inside {@linkcode inNetns}) on `127.0.0.1:PORT` — the API server's own port — and
 * whose outgoing connections are made from the root namespace to the API server. Every byte
 * stays on a loopback, and the API server's kubeconfig works unchanged inside the nodes.
 *
 * @module
 */

import { inNetns } from "../node/bpf/netns.ts";

const MAX_CONNECTIONS = 10_000;

async function pipe(from: Deno.Conn, to: Deno.Conn): Promise<void> {
  try {
    await from.readable.pipeTo(to.writable);
  } catch { /* either side closed */ }
}

/** A relay into one namespace; `close()` stops accepting and ends open connections. */
export interface Relay {
  close(): void;
}

/** Relays `127.0.0.1:port` inside namespace `ns` to `127.0.0.1:port` here. */
export function relayIntoNamespace(ns: string, port: number): Relay {
  const listener = inNetns(ns, () => Deno.listen({ hostname: "127.0.0.1", port }));
  const open = new Set<Deno.Conn>();
  (async () => {
    for (let i = 0; i < MAX_CONNECTIONS; i++) {
      let inner: Deno.Conn;
      try {
        inner = await listener.accept();
      } catch {
        return; // closed
      }
      Deno.connect({ hostname: "127.0.0.1", port }).then((outer) => {
        open.add(inner).add(outer);
        Promise.all([pipe(inner, outer), pipe(outer, inner)]).finally(() => {
          for (const c of [inner, outer]) {
            open.delete(c);
            try {
              c.close();
            } catch { /* closed */ }
          }
        });
      }, () => inner.close());
    }
  })();
  return {
    close() {
      try {
        listener.close();
      } catch { /* closed */ }
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      open.clear();
    },
  };
}
