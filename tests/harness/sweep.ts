/**
 * Removes what crashed earlier test runs left behind: `hf-` namespaces and redis-servers whose
 * creating process is gone. Run at the start of `scripts/test.sh`.
 *
 * @module
 */
import { sweepStaleNamespaces } from "./netns.ts";
import { sweepStaleRedis } from "./redis.ts";

if (import.meta.main) {
  const namespaces = Deno.uid() === 0 ? await sweepStaleNamespaces() : [];
  const redis = await sweepStaleRedis();
  console.log(
    JSON.stringify({
      level: "info",
      msg: "swept stale test resources",
      namespaces,
      redis_pids: redis,
    }),
  );
}
