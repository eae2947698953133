/**
 * Text quoted back to a caller in an error message: a name the caller sent,
 * so anything at all. Control characters (C0, DEL and C1) become `?` so they
 * cannot forge log lines or terminal output, and a long name is cut by code
 * point so that no surrogate pair is split into invalid UTF-16.
 */
export const MAX_QUOTED_CODE_POINTS = 64;

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

export function printable(text: string, max = MAX_QUOTED_CODE_POINTS): string {
  const clean = text.replace(CONTROL, '?');
  // Cheap case first: fewer UTF-16 units than the limit means fewer code points too.
  if (clean.length <= max) return clean;
  const codePoints = Array.from(clean);
  return codePoints.length > max ? `${codePoints.slice(0, max).join('')}…` : clean;
}
