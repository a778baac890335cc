// Command lua-health runs an Argo CD resource health script (health.lua)
// on one Kubernetes object with gopher-lua, the interpreter Argo CD embeds,
// under the same contract: the object is the global `obj`, the script
// returns a table with `status` and `message`.
//
// Coxswain's end-to-end tests use it to prove the health checks in
// examples/argocd/ on objects taken from real Runs, Flows and Approvals.
//
//	lua-health [-open-libs] SCRIPT.lua OBJECT.json    (OBJECT "-" reads stdin)
//
// It prints {"status": ..., "message": ...} on stdout and exits 0; a script
// that fails or returns no table is reported on stderr with exit code 1.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	openLibs := flag.Bool("open-libs", false, "open every standard library (argocd-cm's useOpenLibs: \"true\")")
	timeout := flag.Duration("timeout", time.Second, "how long the script may run (Argo CD allows one second)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: lua-health [-open-libs] [-timeout D] SCRIPT.lua OBJECT.json   (OBJECT - reads stdin)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	health, err := run(flag.Arg(0), flag.Arg(1), Options{OpenLibs: *openLibs, Timeout: *timeout})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lua-health: %v\n", err)
		os.Exit(1)
	}
	out, err := json.Marshal(health)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lua-health: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

func run(scriptPath, objectPath string, opts Options) (Health, error) {
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		return Health{}, fmt.Errorf("reading the script: %w", err)
	}
	var data []byte
	if objectPath == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(objectPath)
	}
	if err != nil {
		return Health{}, fmt.Errorf("reading the object: %w", err)
	}
	object, err := decodeObject(data)
	if err != nil {
		return Health{}, fmt.Errorf("%s: %w", objectPath, err)
	}
	health, err := Evaluate(string(script), object, opts)
	if err != nil {
		return Health{}, fmt.Errorf("%s: %w", scriptPath, err)
	}
	return health, nil
}
