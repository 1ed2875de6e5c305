// Verifies many archives in one process (for conformance/differential.py): reads one
// JSON object per line on stdin ({"path", "args"?}), writes one line per archive:
// {"path", "exit_code", "verdict", "failed": [[group, path], ...]}.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { verifyBundle } from '../src/verify.mjs';
import { nodeServices } from '../src/node.mjs';

const services = nodeServices();
const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  const { path } = JSON.parse(line);
  let out;
  try {
    const r = await verifyBundle(createReadStream(path, { highWaterMark: 1 << 20 }), { source: path, ...services });
    const failed = r.claims.filter((c) => c.state === 'failed').map((c) => [c.group, c.path ?? '']);
    out = { path, exit_code: r.verdict === 'verified' ? 0 : r.verdict === 'failed' ? 1 : 3, verdict: r.verdict, failed, error: r.error };
  } catch (e) {
    out = { path, exit_code: 70, verdict: 'crash', failed: [], error: String(e && e.stack) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}
