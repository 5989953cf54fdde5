// Package localplugin lays out the traefikprovider plugin the way Traefik's
// experimental.localPlugins loader expects it, for tests and deployments:
//
//	<goPath>/src/github.com/scafo/ingress/traefikprovider/.traefik.yml
//	<goPath>/src/github.com/scafo/ingress/traefikprovider/*.go   (no tests)
//
// Traefik uses "./plugins-local" (relative to its working directory) as goPath, with
//
//	experimental:
//	  localPlugins:
//	    scafo:
//	      moduleName: github.com/scafo/ingress/traefikprovider
//
// It is a separate package so that it is not part of the plugin: the plugin directory
// holds only what Traefik interprets.
package localplugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// ModuleName is the plugin's module name for experimental.localPlugins, and its import.
const ModuleName = "github.com/scafo/ingress/traefikprovider"

// ManifestFile is the manifest Traefik reads from the plugin directory.
const ManifestFile = ".traefik.yml"

// SourceDir returns the traefikprovider source directory of this checkout. It relies
// on build-time file paths, so it fails in binaries built with -trimpath.
func SourceDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("traefikprovider source directory unknown (built with -trimpath?)")
	}
	return filepath.Dir(filepath.Dir(file)), nil
}

// Install copies the plugin from srcDir (the traefikprovider directory) into
// goPath/src/<ModuleName>, replacing what was there, and returns that directory.
// Only the manifest and non-test .go files are copied.
func Install(srcDir, goPath string) (string, error) {
	if _, err := ReadManifest(srcDir); err != nil {
		return "", err
	}
	dst := filepath.Join(goPath, "src", filepath.FromSlash(ModuleName))
	if err := os.RemoveAll(dst); err != nil {
		return "", fmt.Errorf("clearing %s: %w", dst, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dst, err)
	}

	entries, err := os.ReadDir(srcDir)
	if err != nil {
		return "", fmt.Errorf("reading plugin sources: %w", err)
	}
	copied := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		isSource := strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")
		if !isSource && name != ManifestFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(srcDir, name))
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			return "", fmt.Errorf("writing %s: %w", name, err)
		}
		if isSource {
			copied++
		}
	}
	if copied == 0 {
		return "", fmt.Errorf("no Go sources in %s", srcDir)
	}
	return dst, nil
}

// Manifest holds the top-level scalar fields of .traefik.yml.
type Manifest struct {
	DisplayName string
	Type        string
	Runtime     string
	Import      string
	BasePkg     string
	Summary     string
	HasTestData bool
}

// ReadManifest reads dir/.traefik.yml and applies the checks Traefik v3.6 makes on a
// local provider plugin (pkg/plugins/plugins.go, checkLocalPluginManifest) for
// ModuleName. It understands the subset of YAML the manifest uses: top-level
// "key: value" lines, folded scalars (">-") and a testData block.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	path := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return m, fmt.Errorf("reading manifest: %w", err)
	}

	fields := map[string]string{}
	key := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if key != "" && key != "testData" {
				fields[key] = strings.TrimSpace(fields[key] + " " + strings.TrimSpace(line))
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return m, fmt.Errorf("%s: unexpected line %q", path, line)
		}
		key = strings.TrimSpace(k)
		v = strings.TrimSpace(v)
		if v == ">-" || v == ">" || v == "|" || v == "|-" {
			v = ""
		}
		fields[key] = strings.Trim(v, `"'`)
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("reading manifest: %w", err)
	}

	m.DisplayName = fields["displayName"]
	m.Type = fields["type"]
	m.Runtime = fields["runtime"]
	m.Import = fields["import"]
	m.BasePkg = fields["basePkg"]
	m.Summary = fields["summary"]
	_, m.HasTestData = fields["testData"]

	var problems []string
	if m.Type != "provider" {
		problems = append(problems, fmt.Sprintf("type is %q, want provider", m.Type))
	}
	if m.Runtime != "" && m.Runtime != "yaegi" {
		problems = append(problems, fmt.Sprintf("runtime is %q, want yaegi or none", m.Runtime))
	}
	if m.Import == "" || !strings.HasPrefix(m.Import, ModuleName) {
		problems = append(problems, fmt.Sprintf("import %q must start with the module name %q", m.Import, ModuleName))
	}
	if m.DisplayName == "" {
		problems = append(problems, "missing displayName")
	}
	if m.Summary == "" {
		problems = append(problems, "missing summary")
	}
	if !m.HasTestData {
		problems = append(problems, "missing testData")
	}
	if len(problems) > 0 {
		return m, fmt.Errorf("%s: %s", path, strings.Join(problems, "; "))
	}
	return m, nil
}
