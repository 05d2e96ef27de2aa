// Preloaded into an agent's Node process (NODE_OPTIONS=--import) by the agent tests: the wall clock starts at
// CTXBENCH_TEST_CLOCK (epoch ms) and runs on from there, so a test decides which minute a run falls in (Gemini
// CLI names its session files by the minute: a resume in a later minute writes a file of its own).
const target = Number(process.env.CTXBENCH_TEST_CLOCK);
if (Number.isFinite(target)) {
  const RealDate = globalThis.Date;
  const offset = target - RealDate.now();
  const now = () => RealDate.now() + offset;
  function ShiftedDate(...args) {
    if (!new.target) return new RealDate(now()).toString();
    return args.length === 0 ? new RealDate(now()) : new RealDate(...args);
  }
  ShiftedDate.prototype = RealDate.prototype;
  ShiftedDate.now = now;
  ShiftedDate.parse = RealDate.parse;
  ShiftedDate.UTC = RealDate.UTC;
  globalThis.Date = ShiftedDate;
}
