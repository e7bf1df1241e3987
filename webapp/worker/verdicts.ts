// The numerics gate's verdicts across visits (levers/gate.ts): one small JSON
// file at the top of this origin's private file system, lever id -> the key it
// was reached under and the verdict. createWritable writes a copy and swaps it
// in on close, so a tab closed mid-write leaves the previous file.
import facts from "../../tinygpt/facts.json";
import type { StoredVerdict, VerdictStore } from "../levers/gate";

const FILE = facts.gate.verdicts_file;

export const opfsVerdicts: VerdictStore = {
  async load() {
    const root = await navigator.storage.getDirectory();
    try {
      const file = await (await root.getFileHandle(FILE)).getFile();
      return JSON.parse(await file.text()) as Record<string, StoredVerdict>;
    } catch {
      return {}; // none yet, or unreadable: the gates run again and write a fresh one
    }
  },
  async save(verdicts) {
    const root = await navigator.storage.getDirectory();
    const out = await (await root.getFileHandle(FILE, { create: true })).createWritable();
    await out.write(JSON.stringify(verdicts));
    await out.close();
  },
};
