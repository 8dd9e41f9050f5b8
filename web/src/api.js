// The JSON API (docs/api.md): fetched from the server, or answered from the page's own data when
// the page is a self-contained file (embed.js).
import { embedApi } from "./embed.js";

export const EMB = (typeof window !== "undefined" && window.GS_EMBED) || null;
const embedded = EMB ? embedApi(EMB) : null;

export async function api(path) {
  if (embedded) return embedded(path);
  const r = await fetch("/api/" + path, { credentials: "same-origin" });
  const body = await r.json().catch(() => ({ error: "not JSON (" + r.status + ")" }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
