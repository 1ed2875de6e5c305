// @ts-check
/** eval-banana bundles (SPEC 10.2). */
import { checkBagFrame } from './bagit.mjs';

/** @param {import('./verifyctx.mjs').Ctx} ctx */
export function verifyEvalBanana(ctx) {
  const b = ctx.bundle;
  const digest = checkBagFrame(ctx, `eval-banana-bundle-${b.run.run_id}`);
  return { bundleDigest: digest, reportId: b.run.run_id, reportDigest: b.run.digest, reportResult: null, reportIssuedAt: null, envelope: null, summary: {} };
}
