// The job's output on a run's page (docs/api.md, /api/runs/REF/log): chunks of bytes per stream as
// the agent read them are cut into lines here, each line shown as a terminal last showed it (the
// text after its last \r) without the terminal's escape sequences. Pure (unit-tested with node
// --test): logFeed keeps a stream's unfinished line between answers, so a live page can ask for
// more from "next" and get the same lines a whole read gives.

// A terminal's control sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL or ESC \", two-byte
// escapes) and the other control characters but tab.
// eslint-disable-next-line no-control-regex
const SEQ = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]/g;

export function shown(line) {
  const parts = line.split("\r").filter((p) => p.length);
  return (parts.length ? parts[parts.length - 1] : "").replace(SEQ, "");
}

// state: { part: { out, err, tty }, t: { ... }, lines: [] }; each new line is
// { t_s, stream, text } (text as shown). Returns the lines added.
export function logFeed(state, chunks) {
  if (!state.lines) state.part = {}, state.t = {}, state.lines = [];
  const added = [];
  for (const c of chunks) {
    const s = c.stream;
    const buf = state.part[s] || "";
    if (!buf.length) state.t[s] = c.t_s;
    const pieces = (buf + c.text).split("\n");
    state.part[s] = pieces.pop();
    pieces.forEach((p, i) => {
      const line = { t_s: i === 0 ? state.t[s] : c.t_s, stream: s, text: shown(p) };
      added.push(line), state.lines.push(line);
    });
    if (pieces.length && state.part[s].length) state.t[s] = c.t_s;
  }
  return added;
}

// The lines not yet ended (a finished run's last words without a newline).
export function logFinish(state) {
  const added = [];
  for (const [s, buf] of Object.entries(state.part || {}))
    if (buf.length) {
      const line = { t_s: state.t[s], stream: s, text: shown(buf) };
      added.push(line), state.lines.push(line);
      state.part[s] = "";
    }
  return added;
}

// The search box's test: a regular expression when it is one (case-insensitive), else the text.
export function logMatcher(q) {
  if (!q) return () => true;
  try {
    const re = new RegExp(q, "i");
    return (line) => re.test(line.text);
  } catch {
    const low = q.toLowerCase();
    return (line) => line.text.toLowerCase().includes(low);
  }
}
