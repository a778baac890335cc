package main

import (
	"strings"
	"testing"
	"time"
)

var defaults = Options{Timeout: time.Second}

func object(t *testing.T, text string) map[string]any {
	t.Helper()
	o, err := decodeObject([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestTheObjectIsTheGlobalObjWithNestedTablesArraysAndNumbers(t *testing.T) {
	script := `
local hs = {}
local c = obj.status.conditions[2]
hs.status = c.status
hs.message = obj.metadata.name .. " " .. tostring(obj.metadata.generation + 1) .. " " .. tostring(#obj.status.conditions) .. " " .. tostring(obj.spec.missing == nil)
return hs`
	got, err := Evaluate(script, object(t, `{"metadata":{"name":"x","generation":2},"spec":{"missing":null},
		"status":{"conditions":[{"status":"Degraded"},{"status":"Healthy"}]}}`), defaults)
	if err != nil {
		t.Fatal(err)
	}
	want := Health{Status: "Healthy", Message: "x 3 2 true"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestAnUnknownStatusIsReportedAsArgoCDReportsIt(t *testing.T) {
	got, err := Evaluate(`return {status = "Fine", message = "all good"}`, object(t, `{}`), defaults)
	if err != nil {
		t.Fatal(err)
	}
	if got != (Health{Status: "Unknown", Message: invalidStatus}) {
		t.Fatalf("got %+v", got)
	}
}

func TestTheStringLibraryIsClosedUnlessAsked(t *testing.T) {
	script := `return {status = "Healthy", message = string.upper("a")}`
	_, err := Evaluate(script, object(t, `{}`), defaults)
	if err == nil || !strings.Contains(err.Error(), "string") {
		t.Fatalf("want an error about string, got %v", err)
	}
	got, err := Evaluate(script, object(t, `{}`), Options{OpenLibs: true, Timeout: time.Second})
	if err != nil || got.Message != "A" {
		t.Fatalf("with open libraries: %+v, %v", got, err)
	}
}

func TestAScriptThatReturnsNoTableFails(t *testing.T) {
	for _, script := range []string{`local hs = {}`, `return "Healthy"`} {
		_, err := Evaluate(script, object(t, `{}`), defaults)
		if err == nil || !strings.Contains(err.Error(), "must return a table") {
			t.Fatalf("%q: want an error, got %v", script, err)
		}
	}
}

func TestAMessageThatIsNotAStringFails(t *testing.T) {
	_, err := Evaluate(`return {status = "Healthy", message = 3}`, object(t, `{}`), defaults)
	if err == nil || !strings.Contains(err.Error(), "message must be a string") {
		t.Fatalf("want an error, got %v", err)
	}
}

func TestAScriptThatNeverEndsIsStopped(t *testing.T) {
	_, err := Evaluate(`while true do end`, object(t, `{}`), Options{Timeout: 50 * time.Millisecond})
	if err == nil {
		t.Fatal("want an error")
	}
}

func TestAnObjectThatIsNotJSONIsRefused(t *testing.T) {
	for _, text := range []string{`[1]`, `null`, `{`} {
		if _, err := decodeObject([]byte(text)); err == nil {
			t.Fatalf("%s: want an error", text)
		}
	}
}
