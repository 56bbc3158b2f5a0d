package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteReport merges annotations into the report file at path, as a run reports its
// progress and plan when it runs beside the controller: a file the executor reads costs
// no request to the API server. The file is replaced, never written in place, so that a
// reader sees a whole report. A nil value removes the annotation.
func WriteReport(path string, annotations map[string]*string) error {
	report, err := ReadReportFile(path)
	if err != nil {
		return err
	}
	for k, v := range annotations {
		if v == nil {
			delete(report, k)
			continue
		}
		report[k] = *v
	}
	data, err := json.Marshal(report)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing the run's report: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing the run's report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the run's report: %w", err)
	}
	return os.Rename(tmp.Name(), path)
}

// ReadReportFile reads the annotations a run wrote to its report file; none when the
// file does not exist.
func ReadReportFile(path string) (map[string]string, error) {
	report := map[string]string{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return report, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the run's report: %w", err)
	}
	if err := json.Unmarshal(data, &report); err != nil {
		return nil, fmt.Errorf("reading the run's report %s: %w", path, err)
	}
	return report, nil
}
