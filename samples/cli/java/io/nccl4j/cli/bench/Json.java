package io.nccl4j.cli.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Writes sample results as JSON (Jackson). */
public final class Json {
  private static final ObjectMapper MAPPER = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

  private Json() {}

  public static void write(Path file, Object value) {
    try {
      Path parent = file.toAbsolutePath().getParent();
      if (parent != null) {
        Files.createDirectories(parent);
      }
      MAPPER.writeValue(file.toFile(), value);
    } catch (IOException e) {
      throw new SampleException(2, "cannot write " + file + ": " + e.getMessage());
    }
  }
}
