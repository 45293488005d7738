// SPDX-License-Identifier: MIT
// Validates speedscope JSON files against the file-format schema that the speedscope npm package
// ships (dist/release/file-format-schema.json), with ajv. Also checks what the schema cannot say:
// every frame index of every sample is within shared.frames, and samples and weights have the
// same length. Usage: node validate-speedscope.js FILE...  Exit 0 if all are valid, 1 if not
// (the errors on stderr), 2 on a usage or setup error.
'use strict';
const fs = require('fs');
const path = require('path');
const Ajv = require('ajv');

const schemaPath = path.join(__dirname, 'node_modules', 'speedscope', 'dist', 'release',
  'file-format-schema.json');
if (process.argv.length < 3) {
  console.error('usage: node validate-speedscope.js FILE...');
  process.exit(2);
}
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
let bad = 0;
for (const file of process.argv.slice(2)) {
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    console.error(`${file}: not JSON: ${e.message}`);
    bad++;
    continue;
  }
  const errors = [];
  if (!validate(doc))
    for (const e of validate.errors.slice(0, 20))
      errors.push(`schema: ${e.instancePath || '/'} ${e.message}`);
  else {
    const nframes = doc.shared.frames.length;
    doc.profiles.forEach((p, i) => {
      if (p.type !== 'sampled') return;
      if (p.samples.length !== p.weights.length)
        errors.push(`profiles[${i}]: ${p.samples.length} samples but ${p.weights.length} weights`);
      p.samples.forEach((s, j) => {
        for (const f of s)
          if (!Number.isInteger(f) || f < 0 || f >= nframes) {
            errors.push(`profiles[${i}].samples[${j}]: frame ${f} not in shared.frames`);
            break;
          }
      });
    });
  }
  if (errors.length) {
    bad++;
    for (const e of errors) console.error(`${file}: ${e}`);
  }
}
process.exit(bad ? 1 : 0);
