package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Health is what a health script returns, as Argo CD reads it.
type Health struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Options are the knobs Argo CD itself has when it runs a health script.
type Options struct {
	// OpenLibs opens every standard library, as Argo CD does for its
	// built-in scripts and for an argocd-cm script with
	// `resource.customizations.useOpenLibs.<group>_<kind>: "true"`.
	// Without it (argocd-cm's default) only package, base and table are
	// open: no string, math or os library.
	OpenLibs bool
	// Timeout bounds the script's run, as Argo CD's one-second context does.
	Timeout time.Duration
}

// The statuses Argo CD accepts from a script; anything else is reported as
// Unknown with invalidStatus as the message.
var validStatuses = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true,
	"Healthy": true, "Degraded": true, "Missing": true,
}

const invalidStatus = "Lua returned an invalid health status"

// Evaluate runs script with the global `obj` set to object (a Kubernetes
// object decoded from JSON) and reads the table it returns, the way Argo CD's
// application controller does for a resource's health.
func Evaluate(script string, object map[string]any, opts Options) (Health, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !opts.OpenLibs})
	defer l.Close()
	if !opts.OpenLibs {
		if err := openRestricted(l); err != nil {
			return Health{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, object))
	if err := l.DoString(script); err != nil {
		return Health{}, fmt.Errorf("the script failed: %w", err)
	}
	returned := l.Get(-1)
	table, ok := returned.(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the script must return a table, not %s", returned.Type())
	}
	return readHealth(table)
}

// openRestricted opens the libraries Argo CD opens for an argocd-cm script
// by default. (Argo CD also opens a reduced os library; a script that uses
// os fails here, which is stricter, never looser.)
func openRestricted(l *lua.LState) error {
	libs := []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	}
	for _, lib := range libs {
		err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name))
		if err != nil {
			return fmt.Errorf("opening the %s library: %w", lib.name, err)
		}
	}
	return nil
}

// readHealth takes `status` and `message` from the returned table; like
// Argo CD, an unknown status becomes Unknown with a message saying so.
func readHealth(table *lua.LTable) (Health, error) {
	status, err := stringField(table, "status")
	if err != nil {
		return Health{}, err
	}
	message, err := stringField(table, "message")
	if err != nil {
		return Health{}, err
	}
	if !validStatuses[status] {
		return Health{Status: "Unknown", Message: invalidStatus}, nil
	}
	return Health{Status: status, Message: message}, nil
}

func stringField(table *lua.LTable, name string) (string, error) {
	switch v := table.RawGetString(name).(type) {
	case lua.LString:
		return string(v), nil
	case *lua.LNilType:
		return "", nil
	default:
		return "", fmt.Errorf("the returned table's %s must be a string, not %s", name, v.Type())
	}
}

// toLua turns a value decoded by encoding/json into Lua values the way Argo
// CD hands an object to its scripts: objects become tables keyed by string,
// arrays become sequences (1-based), numbers become Lua numbers, null nil.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		array := l.CreateTable(len(v), 0)
		for _, item := range v {
			array.Append(toLua(l, item))
		}
		return array
	case map[string]any:
		table := l.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetH(lua.LString(key), toLua(l, item))
		}
		return table
	default:
		return lua.LNil
	}
}

// decodeObject reads one Kubernetes object as JSON (`kubectl get -o json`).
func decodeObject(data []byte) (map[string]any, error) {
	var object map[string]any
	if err := json.Unmarshal(data, &object); err != nil {
		return nil, fmt.Errorf("the object is not a JSON object: %w", err)
	}
	if object == nil {
		return nil, errors.New("the object is not a JSON object: null")
	}
	return object, nil
}
